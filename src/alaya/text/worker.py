"""The text model in a process of its own: ``ModelProcess``, the loader servers give their
``PromptEncoder`` (``alaya play``, ``alaya serve``).

Importing and loading all-MiniLM-L6-v2 is seconds of Python (transformers' imports, 5-10 s on
two cores). On one of a server's threads it holds the interpreter lock that every session's
engine, model and network threads need between their native calls, and frames stall while it
loads; in a child process, at a lower priority (``nice``), it only takes spare CPU time. The
child (``python -m alaya.text.worker NICE THREADS``) loads the model, says ``{"ready": true}``
on stdout, then answers each line ``{"texts": [...], "normalize": bool}`` with one line
``{"embeddings": [[...], ...]}`` (or ``{"error": ...}``) until its stdin closes, which it does
when the server exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import torch


class ModelProcess:
    """The text model in a child process, with SentenceTransformer's ``encode`` (what
    ``PromptEncoder`` calls): ``PromptEncoder(loader=ModelProcess)``. Making one starts the child
    and waits until its model is loaded (ImportError if the model's package is missing)."""

    def __init__(self, nice: int = 10, threads: int = 1):
        self._proc = subprocess.Popen([sys.executable, "-m", "alaya.text.worker", str(nice), str(threads)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._lock = threading.Lock()
        reply = self._read()
        if "error" in reply:
            self.close()
            raise (ImportError if reply.get("kind") == "ImportError" else RuntimeError)(reply["error"])

    def _read(self) -> dict:
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the text model's process ended (exit code {self._proc.poll()})")
        return json.loads(line)

    def encode(self, texts: list[str], convert_to_tensor: bool = True, normalize_embeddings: bool = True,
               show_progress_bar: bool = False) -> torch.Tensor:
        """(N, 384) float32 embeddings of ``texts``."""
        with self._lock:
            self._proc.stdin.write(json.dumps({"texts": list(texts), "normalize": normalize_embeddings}) + "\n")
            self._proc.stdin.flush()
            reply = self._read()
        if "error" in reply:
            raise RuntimeError(f"the text model's process: {reply['error']}")
        return torch.tensor(reply["embeddings"], dtype=torch.float32)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()


def main(nice: int, threads: int) -> None:
    protocol = os.fdopen(os.dup(1), "w")               # replies; whatever libraries print goes to stderr
    os.dup2(2, 1)
    try:
        os.nice(nice)
    except OSError:
        pass
    torch.set_num_threads(threads)
    from alaya.text.encoder import load_minilm

    def say(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()
    try:
        model = load_minilm()
    except ImportError as err:
        say({"error": str(err), "kind": "ImportError"})
        return
    say({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            emb = model.encode(request["texts"], convert_to_tensor=True, normalize_embeddings=request["normalize"],
                               show_progress_bar=False)
            say({"embeddings": emb.detach().float().cpu().tolist()})
        except Exception as err:                        # reported to the server, which names it
            say({"error": f"{type(err).__name__}: {err}"})


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
