"""How long the embedded models take to load: the GGUF path every time vs our cached fp32 directory.

    python bench/model_load.py   ->  outputs/bench/model_load.json

"Peer" here is the naive recipe (``from_pretrained(pkg_dir, gguf_file=...)`` on every load, as the
package's README and most notebooks do); ours dequantizes once and reloads a plain HF directory.
"""
from common import summarize, timed, write_result  # noqa: I001

from gr_core.llm import embedded_gguf_path, embedded_llm_dir, load_llm
from gr_core.text_encoder import load_text_encoder

REPEATS = 3


def gguf_load():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def main() -> None:
    embedded_llm_dir()  # build the cache once, outside the timings
    gguf = [timed(gguf_load)[1] for _ in range(REPEATS)]
    cached = [timed(load_llm)[1] for _ in range(REPEATS)]
    encoder = [timed(load_text_encoder)[1] for _ in range(REPEATS)]
    result = {"peer_gguf_load": summarize(gguf), "ours_cached_load": summarize(cached),
              "speedup": summarize(gguf)["median_s"] / summarize(cached)["median_s"],
              "text_encoder_load": summarize(encoder), "repeats": REPEATS}
    path = write_result("model_load", result)
    print(f"LLM load: GGUF every time {result['peer_gguf_load']['median_s']:.2f} s, cached fp32 dir "
          f"{result['ours_cached_load']['median_s']:.2f} s ({result['speedup']:.0f}x); sentence encoder "
          f"{result['text_encoder_load']['median_s']:.2f} s  -> {path}")


if __name__ == "__main__":
    main()
