"""Upload a voice with the ``openai`` client, speak with it, then synthesise a batch with raw HTTP.

The openai client has methods for creating and deleting voices and for speech; it has none
for listing voices or for a batch, so those two use httpx. Needs a model that clones voices:

    omni serve --model qwen/qwen3-tts --voices-dir ./voices &
    python examples/voices_and_batch.py reference.wav --ref-text "What the recording says."
"""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import httpx
from openai import OpenAI


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", type=Path, help="any audio file ffmpeg reads (WAV, FLAC, MP3, Ogg, M4A)")
    parser.add_argument("--ref-text", default="", help="the transcript of the recording")
    parser.add_argument("--name", default="my-voice")
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--api-key", default="unused")
    args = parser.parse_args()
    client = OpenAI(base_url=f"{args.base_url}/v1", api_key=args.api_key)
    auth = {"Authorization": f"Bearer {args.api_key}"}

    # consent is the openai API's required field; omni stores no consent records and ignores it
    voice = client.audio.voices.create(audio_sample=(args.recording.name, args.recording.read_bytes()), consent="-", name=args.name,
                                       extra_body={"ref_text": args.ref_text})
    print(f"uploaded {voice.name}: {voice.id}, sha256 {voice.model_extra['sha256'][:12]}")
    listed = httpx.get(f"{args.base_url}/v1/audio/voices", headers=auth).json()["data"]
    print("voices:", ", ".join(f"{v['name']} ({v['type']})" for v in listed))

    client.audio.speech.create(model=voice.model_extra["model"], voice=voice.name, input="This is my cloned voice.",
                               response_format="wav").write_to_file("cloned.wav")
    print("wrote cloned.wav")

    items = [{"input": "First of three."}, {"input": "Second, in the cloned voice.", "voice": voice.name}, {"input": ""}]
    batch = httpx.post(f"{args.base_url}/v1/audio/speech/batch", json={"items": items, "response_format": "wav"}, headers=auth, timeout=300).json()
    for entry in batch["data"]:
        if "error" in entry:
            print(f"item {entry['index']}: error {entry['error']['code']}: {entry['error']['message']}")
        else:
            Path(f"batch-{entry['index']}.wav").write_bytes(base64.b64decode(entry["audio"]))
            print(f"item {entry['index']}: batch-{entry['index']}.wav ({entry['audio_seconds']} s)")

    client.audio.voices.delete(voice.id)
    print(f"deleted {voice.id}")


if __name__ == "__main__":
    main()
