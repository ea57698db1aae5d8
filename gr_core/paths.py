"""Where things live: the repository root, the read-only raw data, the ignored cache (never the current directory:
papermill, nbval and JupyterLab start kernels in different ones; docs/environment.md)."""
from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "GR_DATA_DIR"
CACHE_ENV = "GR_CACHE_DIR"
OUTPUTS_ENV = "GR_OUTPUTS_DIR"


class DataNotFoundError(FileNotFoundError):
    """The raw benchmark data (or one file in it) is not where we looked."""


# the folder holding this package: a checkout's root (with notebooks/ and the committed outputs/) unless installed
PACKAGE_PARENT = Path(__file__).resolve().parent.parent


def repo_root(start: str | Path | None = None) -> Path:
    """The folder holding this project's ``pyproject.toml``, above ``start`` (default: the cwd), else above the
    installed ``gr_core`` package (an editable install's checkout)."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file() and (folder / "gr_core").is_dir():
            return folder
    if (PACKAGE_PARENT / "pyproject.toml").is_file():
        return PACKAGE_PARENT
    raise FileNotFoundError(f"no gr_core checkout (pyproject.toml + gr_core/) above {here}")


def data_root() -> Path:
    """The raw data folder: ``$GR_DATA_DIR``, else ``../shared/data`` beside the repository; a
    :class:`DataNotFoundError` naming where it looked and how to fix it."""
    env = os.environ.get(DATA_ENV)
    folder = Path(env) if env else repo_root().parent / "shared" / "data"
    if folder.is_dir():
        return folder.resolve()
    looked = f"${DATA_ENV}={env}" if env else folder
    raise DataNotFoundError(
        f"raw benchmark data not found; looked at: {looked}. Put the shared data folder beside the repository as "
        f"../shared/data, or set {DATA_ENV} "
        "to the folder that holds explagraphs/, webqsp/, metaqa/ and scene_graphs/; to download it from its public "
        "sources: ./gr data --fetch DIR, then set GR_DATA_DIR=DIR (docs/data.md)."
    )


def hub_cache_root() -> Path:
    """The Hugging Face hub cache, in huggingface_hub's order: ``$HF_HUB_CACHE``, ``$HUGGINGFACE_HUB_CACHE``,
    ``$HF_HOME/hub``, ``$XDG_CACHE_HOME/huggingface/hub``, ``~/.cache/huggingface/hub`` (``~`` and variables
    expanded), read at each call."""
    env = os.environ
    for value in (env.get("HF_HUB_CACHE"), env.get("HUGGINGFACE_HUB_CACHE")):
        if value:
            return Path(os.path.expandvars(value)).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def hub_snapshot(repo: str) -> Path:
    """``<hub cache>/datasets--owner--name/snapshots/<rev>/data`` of a dataset repo: the revision ``refs/main`` names,
    else the newest (a path that does not exist when there is none, to be named in an error)."""
    base = hub_cache_root() / f"datasets--{repo.replace('/', '--')}"
    snapshots = [p for p in (base / "snapshots").glob("*") if any((p / "data").glob("*.parquet"))]
    ref = base / "refs" / "main"
    main = base / "snapshots" / ref.read_text().strip() if ref.is_file() else None
    if main in snapshots:
        return main / "data"
    if snapshots:
        return max(snapshots, key=lambda p: p.stat().st_mtime) / "data"
    return base / "snapshots" / "<rev>" / "data"


# The papers' own datasets (docs/data.md): where ``./gr data --fetch DIR --papers`` puts them in the data folder
# (the hub dataset repo, or "" for GQA's zips; the folder under the data folder)
PAPERS_DATA = {"rog_webqsp": ("rmanluo/RoG-webqsp", "rog/webqsp"), "rog_cwq": ("rmanluo/RoG-cwq", "rog/cwq"),
               "gqa": ("", "gqa")}
# GQA's official files per split: (scene graphs, balanced questions)
GQA_FILES = (("train_sceneGraphs.json", "train_balanced_questions.json"),
             ("val_sceneGraphs.json", "val_balanced_questions.json"))


def papers_data_here(name: str) -> bool:
    """Whether the papers' dataset ``name`` (a key of :data:`PAPERS_DATA`) is here: RoG shards in the data folder or
    the hub cache, GQA's four official files. A presence check (the presets choose with it); an incomplete download
    is then named by the dataset's reader."""
    repo, folder = PAPERS_DATA[name]
    try:
        local = data_root() / folder
    except DataNotFoundError:
        local = None
    if not repo:
        return local is not None and all((local / f).is_file() for pair in GQA_FILES for f in pair)
    return (local is not None and any((local / "data").glob("*.parquet"))) or any(hub_snapshot(repo).glob("*.parquet"))


def data_file(*parts: str) -> Path:
    """One file (or folder) under :func:`data_root`, checked to exist (else a :class:`DataNotFoundError`)."""
    root = data_root()
    path = root.joinpath(*parts)
    if not path.exists():
        raise DataNotFoundError(
            f"missing raw data file {path} (data root {root}); ./gr data --check names every missing or corrupt "
            f"file and ./gr data --fetch {root} downloads them (docs/data.md)"
        )
    return path


def cache_root() -> Path:
    """The git-ignored cache: ``$GR_CACHE_DIR``, else ``<repo>/.cache``. Created on demand."""
    root = Path(os.environ.get(CACHE_ENV) or repo_root() / ".cache")
    root.mkdir(parents=True, exist_ok=True)
    return root


def outputs_root(preset: str, create: bool = True) -> Path:
    """``$GR_OUTPUTS_DIR/<preset>``, default ``<repo>/outputs/<preset>``; created on demand (``create``: a plan only
    reads it)."""
    out = Path(os.environ.get(OUTPUTS_ENV) or repo_root() / "outputs") / preset
    if create:
        out.mkdir(parents=True, exist_ok=True)
    return out


def repo_relative(path: str | Path | None) -> str | None:
    """``path`` relative to the repository root when it lies inside it (for records that are committed and read on
    other machines), else as given; None stays None."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def find_notebooks(folder: Path, only: list[str] | None = None) -> list[Path]:
    """``NN_*.ipynb`` in ``folder``, sorted; ``only`` keeps those whose stem starts with one of its items (a file name
    too: ``04_gnn_rag.ipynb``; a number picks by number: ``4`` and ``04`` are ``04_*``, not every name starting with
    a "0"), a ``ValueError`` naming an item that matches none."""
    notebooks = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if only:
        def picks(item: str, nb: Path) -> bool:
            if item.isdigit():
                return nb.stem[:2].isdigit() and int(nb.stem[:2]) == int(item)
            return bool(item) and nb.stem.startswith(item)  # an empty item would start every name

        prefixes = [o.removesuffix(".ipynb") for o in only]
        unmatched = [o for o, p in zip(only, prefixes) if not any(picks(p, nb) for nb in notebooks)]
        if unmatched:
            raise ValueError(f"--only {' '.join(unmatched)}: no notebook in {folder} starts with it; the notebooks: "
                             f"{', '.join(nb.stem for nb in notebooks)}")
        notebooks = [nb for nb in notebooks if any(picks(p, nb) for p in prefixes)]
    return notebooks
