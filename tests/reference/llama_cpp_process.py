"""llama.cpp's greedy continuations of prompts, through llama_cpp_decode.mjs (node-llama-cpp),
for the Python reference tests that hold attograd's GGUF files to it."""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def llama_cpp_greedy(llama_dir, gguf, prompts, tokens, lora=""):
    """llama.cpp's `tokens` greedy ids after each prompt (a list of ids), with the adapter
    LORA ("": none): one process for them all, whose start is most of its time"""
    ids = [str(i) for prompt in prompts for i in list(prompt) + [","]]
    p = subprocess.run(["node", os.path.join(HERE, "llama_cpp_decode.mjs"), llama_dir, gguf,
                        str(tokens), "-", *ids], capture_output=True, text=True,
                       env=dict(os.environ, LORA=lora))
    if p.returncode != 0:
        raise RuntimeError(f"node llama_cpp_decode.mjs {gguf} ... exited {p.returncode}: "
                           f"{p.stdout[-800:]}{p.stderr[-800:]}")
    generations = json.loads(p.stdout)["generations"]
    if len(generations) != len(prompts):
        raise RuntimeError(f"llama.cpp decoded {len(generations)} prompts of {len(prompts)}")
    return generations
