"""The talker's prompt, laid out as the reference lays it out for each variant and mode.

A prompt is a sum of two streams per position, text (projected text embeddings) and codec
(codec-vocabulary embeddings):

    [instruct text]  <|im_start|>assistant\\n      (text only)
    tts_pad ... tts_pad tts_bos                      + think/nothink, [language], think_eos, [speaker], pad
    then one of
      non-streaming text: body + tts_eos            + codec_pad each;  tts_pad + codec_bos
      streaming text:     first body token          + codec_bos;       the rest trails the frames
      voice clone (ICL):  ref text + body + tts_eos  over codec_bos + reference frames

Text that does not fit the prompt (``trailing``) is added to the frames' inputs one position per
step, then ``tts_pad``. A request whose input is still open (``open_input``, streaming layouts
only) gets its trailing text without ``tts_eos``: more text follows (``append.OpenText``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .talker import Talker

ROLE_TOKENS = 3  # <|im_start|> assistant \n
TEXT_TAIL = 5  # <|im_end|> \n <|im_start|> assistant \n
REF_TAIL = 2  # <|im_end|> \n


@dataclass(frozen=True)
class PromptInputs:
    """Everything the prompt depends on; built by preprocessing, read by the engine."""

    text_ids: tuple[int, ...]
    instruct_ids: tuple[int, ...] | None
    language_id: int | None
    speaker_id: int | None  # CustomVoice: a codec-vocabulary id
    x_vector: torch.Tensor | None  # Base: the speaker encoder's embedding
    ref_ids: tuple[int, ...] | None  # Base ICL: the reference transcript's ids
    ref_codes: torch.Tensor | None  # Base ICL: [T, G] reference frames
    non_streaming: bool


def body_ids(inputs: PromptInputs) -> list[int]:
    """The spoken text's ids without the assistant template around them."""
    return list(inputs.text_ids[ROLE_TOKENS:-TEXT_TAIL])


def with_body(inputs: PromptInputs, body: list[int]) -> PromptInputs:
    """``inputs`` with the spoken text's ids replaced (the template kept)."""
    ids = inputs.text_ids
    return replace(inputs, text_ids=(*ids[:ROLE_TOKENS], *body, *ids[-TEXT_TAIL:]))


def body_in_prompt(inputs: PromptInputs) -> int:
    """How many body ids a streaming-layout prompt holds before any text trails: one, or (in-context cloning)
    as many as the reference frames leave room for after the reference transcript."""
    if inputs.ref_codes is None:
        return 1
    ref = len(list(inputs.ref_ids or ())[ROLE_TOKENS:-REF_TAIL])
    return max(1, 1 + inputs.ref_codes.shape[0] - ref)


def build_prompt(talker: Talker, inputs: PromptInputs, *, open_input: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(prompt [1, T, hidden], trailing [n, hidden], tts_pad [hidden])``; ``open_input``: no ``tts_eos``
    (the prompt must hold ``body_in_prompt`` body ids)."""
    spec = talker.spec
    c, t = spec.codec, spec.text
    ids = list(inputs.text_ids)
    bos, eos, pad = talker.text([t.tts_bos, t.tts_eos, t.tts_pad])
    think = [c.nothink, c.think_bos, c.think_eos] if inputs.language_id is None else [c.think, c.think_bos, inputs.language_id, c.think_eos]
    codec = [talker.codec(think)]
    if inputs.speaker_id is not None:
        codec.append(talker.codec([inputs.speaker_id]))
    elif inputs.x_vector is not None:
        codec.append(inputs.x_vector.to(pad.device, pad.dtype)[None])
    codec.append(talker.codec([c.pad, c.bos]))
    codec_stream = torch.cat(codec)
    n = codec_stream.shape[0]
    text_stream = torch.cat([pad[None].expand(n - 2, -1), bos[None]])
    parts = []
    if inputs.instruct_ids:
        parts.append(talker.text(list(inputs.instruct_ids)))
    parts.append(talker.text(ids[:ROLE_TOKENS]))
    parts.append(text_stream + codec_stream[:-1])
    body = ids[ROLE_TOKENS:-TEXT_TAIL]
    if inputs.ref_codes is not None:
        head, trailing = _icl(talker, body, inputs, eos, pad, open_input)
        parts.append(head)
    elif inputs.non_streaming:
        text = torch.cat([talker.text(body), eos[None]])
        parts.append(text + talker.codec([c.pad] * text.shape[0]))
        parts.append((pad + talker.codec([c.bos])[0])[None])
        trailing = pad[None]
    else:
        parts.append(talker.text(body[:1]) + codec_stream[-1:])
        trailing = talker.text(body[1:]) if open_input else torch.cat([talker.text(body[1:]), eos[None]])
    return torch.cat(parts)[None], trailing, pad


def _icl(talker: Talker, body: list[int], inputs: PromptInputs, eos: torch.Tensor, pad: torch.Tensor,
         open_input: bool) -> tuple[torch.Tensor, torch.Tensor]:
    c = talker.spec.codec
    ref = list(inputs.ref_ids or ())[ROLE_TOKENS:-REF_TAIL]
    text = talker.text(ref + body) if open_input else torch.cat([talker.text(ref + body), eos[None]])
    codec = torch.cat([talker.codec([c.bos]), talker.frame_embeddings(inputs.ref_codes)])
    if inputs.non_streaming:
        head = torch.cat([text + talker.codec([c.pad] * text.shape[0]), codec + pad])
        return head, pad[None]
    if text.shape[0] > codec.shape[0] or (open_input and text.shape[0] == codec.shape[0]):
        return text[: codec.shape[0]] + codec, text[codec.shape[0] :]
    text = torch.cat([text, pad[None].expand(codec.shape[0] - text.shape[0], -1)])
    return text + codec, pad[None]
