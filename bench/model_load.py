"""How long the embedded models take to load: the GGUF path every time vs our cached fp32 directory.

    python bench/model_load.py   ->  outputs/bench/model_load.json

"Peer" here is the naive recipe (``from_pretrained(pkg_dir, gguf_file=...)`` on every load, as the
package's README and most notebooks do); ours dequantizes once and reloads a plain HF directory.
"""
import argparse

from common import summarize, timed, write_result  # noqa: I001
from transformers import AutoModelForCausalLM, AutoTokenizer

from gr_core.config import LLMConfig
from gr_core.llm import EMBEDDED_LLMS, _read_tokenizer, embedded_gguf_path, embedded_llm_dir, load_llm, unavailable
from gr_core.text_encoder import load_text_encoder

REPEATS = 3


def gguf_load(name: str = "smollm2-135m-instruct"):
    gguf = embedded_gguf_path(name)
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def load_llm_cold(cfg: LLMConfig):
    """``load_llm`` with the process's tokenizer memo emptied first (the GGUF's sha256 stays memoized: a new process
    hashes it once more, ~0.1 s)."""
    _read_tokenizer.cache_clear()
    return load_llm(cfg)


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python bench/model_load.py", description=__doc__.split("\n")[0],
                            epilog="No options: the measurement is fixed (see the module docstring).").parse_args(argv)
    llms = {}
    for name in EMBEDDED_LLMS:  # every embedded LLM that is installed (Gemma 3 270M: the optional gemma extra)
        if unavailable(f"embedded:{name}"):
            continue
        embedded_llm_dir(name=name)  # build the cache once, outside the timings
        gguf = [timed(gguf_load, name)[1] for _ in range(REPEATS)]
        cached = [timed(load_llm_cold, LLMConfig(model=f"embedded:{name}"))[1] for _ in range(REPEATS)]
        llms[name] = {"peer_gguf_load": summarize(gguf), "ours_cached_load": summarize(cached),
                      "speedup": summarize(gguf)["median_s"] / summarize(cached)["median_s"]}
    encoder = [timed(load_text_encoder)[1] for _ in range(REPEATS)]
    result = {**llms["smollm2-135m-instruct"], "llms": llms, "text_encoder_load": summarize(encoder),
              "repeats": REPEATS}
    path = write_result("model_load", result)
    for name, r in llms.items():
        print(f"{name} load: GGUF every time {r['peer_gguf_load']['median_s']:.2f} s, cached fp32 dir "
              f"{r['ours_cached_load']['median_s']:.2f} s ({r['speedup']:.0f}x)")
    print(f"sentence encoder {result['text_encoder_load']['median_s']:.2f} s  -> {path}")


if __name__ == "__main__":
    main()
