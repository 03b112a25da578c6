"""A voice agent's side of ``/v1/audio/speech/stream`` with a plain ``websockets`` client.

Text arrives word by word, as from a language model; audio comes back while it still
arrives and is written to one WAV file per answer. ``--barge-in`` cancels the second
answer after its first audio (what an agent does when the user starts talking).

    omni serve &                                  # the espeak pipeline on 127.0.0.1:8000
    python examples/voice_agent_ws.py --out /tmp/answers

Against a Qwen3-TTS 12 Hz checkpoint (``omni serve --model Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice
--weights DIR``, then ``--voice vivian``) the server appends each answer's words to one running
request (``text_append`` in ``session.updated``): one segment per answer instead of one per clause.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
import wave
from pathlib import Path

import websockets

ANSWERS = [
    "Sure, I can help with that. The meeting is at three, in the small room on the second floor.",
    "Here is a much longer answer that the user will interrupt, because they already know the rest of it and want to speak.",
    "Anything else?",
]


async def answer(ws, text: str, out: Path, barge_in: bool, rate: int) -> None:
    async def produce() -> None:  # a language model streaming tokens
        for word in text.split(" "):
            await ws.send(json.dumps({"type": "input_text.delta", "delta": word + " "}))
            await asyncio.sleep(0.03)
        await ws.send(json.dumps({"type": "input_text.done"}))

    started = time.perf_counter()
    producer = asyncio.create_task(produce())
    pcm = bytearray()
    first = None
    async for raw in ws:
        message = json.loads(raw)
        if message["type"] == "audio.delta":
            pcm += base64.b64decode(message["audio"])
            if first is None:
                first = time.perf_counter() - started
                print(f"  first audio after {1000 * first:.0f} ms")
                if barge_in:
                    producer.cancel()
                    await ws.send(json.dumps({"type": "response.cancel"}))
        elif message["type"] == "segment.done":
            print(f"  segment {message['segment']}: {message['text']!r} ({message['audio_seconds']:.2f} s)")
        elif message["type"] == "error":
            print(f"  error: {message['error']['code']}: {message['error']['message']}")
        elif message["type"] == "response.done":
            print(f"  {message['status']}: {message['segments']} segments")
            break
    with wave.open(str(out), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(bytes(pcm))
    print(f"  wrote {out} ({len(pcm) / 2 / rate:.2f} s)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="ws://127.0.0.1:8000/v1/audio/speech/stream")
    parser.add_argument("--api-key", default=None, help="the server's --api-key, if it has one")
    parser.add_argument("--voice", default=None)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--barge-in", action="store_true", help="cancel the second answer after its first audio")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    rate = 24000
    async with websockets.connect(args.url, additional_headers=headers, max_size=2**22) as ws:
        session = {"response_format": "pcm", "sample_rate": rate, **({"voice": args.voice} if args.voice else {})}
        await ws.send(json.dumps({"type": "session.update", "session": session}))
        updated = json.loads(await ws.recv())
        print(updated)
        if updated.get("type") == "session.updated":
            how = "appended to one running request" if updated["session"].get("text_append") else "synthesised as separate segments"
            print(f"this model's answers are {how}")
        for index, text in enumerate(ANSWERS):
            print(f"answer {index}: {text}")
            await answer(ws, text, args.out / f"answer-{index}.wav", args.barge_in and index == 1, rate)
        await ws.send(json.dumps({"type": "session.close"}))
        print(json.loads(await ws.recv()))


if __name__ == "__main__":
    asyncio.run(main())
