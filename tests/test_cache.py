"""The persistent compilation cache that the CLI and the estimators switch on (issue 16, item 2),
and an import that changes no JAX option (issue 28, item 3).

Process-level behaviour is checked in fresh subprocesses (each imports jax and jaxrank from
scratch, with ``XDG_CACHE_HOME`` pointed at a temporary directory and no ``JAX_*`` variables
from the test session; ``enable_default_cache()`` stands for an entry point);
:func:`jaxrank.set_compilation_cache` in this process, restoring JAX's config afterwards.
The one expensive test compiles a small fit in two processes and checks that
the second loads the solver from the first one's cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import _cache

JAX_DEFAULT_MIN_TIME = 1.0  # jax_persistent_cache_min_compile_time_secs when nobody sets it
ENTRY = "jaxrank._cache.enable_default_cache()"  # what the CLI and the estimators' fit call

# Prints, as JSON: the cache dir JAX uses, the min compile time, and the warnings of the import.
_REPORT = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    {pre}
    import jax, jaxrank
    {post}
print(json.dumps({{
    "dir": jax.config.jax_compilation_cache_dir,
    "min_time": jax.config.jax_persistent_cache_min_compile_time_secs,
    "api_dir": None if jaxrank.compilation_cache_dir() is None
               else str(jaxrank.compilation_cache_dir()),
    "warnings": [[w.category.__name__, str(w.message)] for w in caught],
}}))
"""


def _env(tmp_path: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "JAXRANK_"))}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    env.update(extra)
    return env


def _run(code: str, env: dict, cwd: Path, timeout: float = 300) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _report(tmp_path: Path, *, pre: str = "pass", post: str = "pass", **env: str) -> dict:
    code = _REPORT.format(pre=pre, post=post)
    return _run(code, _env(tmp_path, **env), cwd=tmp_path)


@pytest.mark.slow  # a fresh process
def test_import_changes_no_jax_option(tmp_path):
    code = """
import json, jax
before = {k: repr(v) for k, v in jax.config.values.items()}
import jaxrank, jaxrank.sklearn, jaxrank.cli
after = {k: repr(v) for k, v in jax.config.values.items()}
print(json.dumps({"changed": sorted(k for k in before if before[k] != after.get(k)),
                  "n": len(before)}))
"""
    r = _run(code, _env(tmp_path), cwd=tmp_path)
    assert r["n"] > 100 and r["changed"] == []
    assert not (tmp_path / "xdg").exists()  # no directory made either


def test_entry_point_uses_per_user_default(tmp_path):
    r = _report(tmp_path, post=ENTRY)
    want = tmp_path / "xdg" / "jaxrank" / "jax"
    assert r["dir"] == r["api_dir"] == str(want)
    assert r["min_time"] == _cache.MIN_COMPILE_TIME_SECS
    assert r["warnings"] == []
    assert want.is_dir() and (want.stat().st_mode & 0o777) == 0o700  # trusted code: owner only
    assert list(want.iterdir()) == []  # the probe file is gone; nothing compiled yet
    assert sorted(p.name for p in tmp_path.iterdir()) == ["xdg"]  # nothing in the cwd


def test_entry_point_never_lowers_a_threshold_the_user_set(tmp_path):
    pre = "import jax; jax.config.update('jax_persistent_cache_min_compile_time_secs', 2.0)"
    r = _report(tmp_path, pre=pre, post=ENTRY)
    assert r["dir"] == str(tmp_path / "xdg" / "jaxrank" / "jax") and r["min_time"] == 2.0


def test_estimators_and_cli_enable_it(monkeypatch):
    seen = []
    monkeypatch.setattr(_cache, "enable_default_cache", lambda: seen.append(1))
    from jaxrank import cli, sklearn

    X, y = jaxrank.datasets.make_rare_class(60, 0.2, 0.75, d=3, seed=0)
    sklearn.RankRCClassifier(2.0**-4).fit(X, y)
    assert seen == [1]
    assert cli.main(["predict", "no-such-model.npz", "no-such-data.csv"]) == 2
    assert seen == [1, 1]


def test_home_fallback_without_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _cache.default_cache_dir() == tmp_path / ".cache" / "jaxrank" / "jax"


@pytest.mark.slow  # a fresh process
def test_env_dir_is_the_users_and_left_alone(tmp_path):
    env_dir = tmp_path / "env-cache"
    r = _report(tmp_path, post=ENTRY, JAX_COMPILATION_CACHE_DIR=str(env_dir))
    assert r["dir"] == str(env_dir) and r["min_time"] == JAX_DEFAULT_MIN_TIME
    assert not (tmp_path / "xdg").exists()
    r = _report(
        tmp_path,
        post=ENTRY,
        JAX_COMPILATION_CACHE_DIR=str(env_dir),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="2.5",
    )
    assert r["dir"] == str(env_dir) and r["min_time"] == 2.5


def test_user_jax_config_left_alone(tmp_path):
    mine = tmp_path / "mine"
    pre = f"import jax; jax.config.update('jax_compilation_cache_dir', {str(mine)!r})"
    r = _report(tmp_path, pre=pre, post=ENTRY)
    assert r["dir"] == str(mine) and r["min_time"] == JAX_DEFAULT_MIN_TIME
    assert not mine.exists() and not (tmp_path / "xdg").exists()  # not even probed


@pytest.mark.parametrize("value", ["1", "yes"])
def test_opt_out_env(tmp_path, value):
    r = _report(tmp_path, post=ENTRY, JAXRANK_NO_COMPILATION_CACHE=value)
    assert r["dir"] is None and r["api_dir"] is None and r["min_time"] == JAX_DEFAULT_MIN_TIME
    assert not (tmp_path / "xdg").exists()


def test_unusable_dir_one_warning_then_silent(tmp_path):
    # A path under a regular file: mkdir fails for root too (chmod would not stop root).
    blocker = tmp_path / "xdg"
    blocker.write_text("not a directory")
    post = f"{ENTRY}; jax.block_until_ready(jax.jit(lambda x: x * 2 + 1)(jax.numpy.arange(5.0)))"
    r = _report(tmp_path, post=post)
    assert r["dir"] is None and r["api_dir"] is None
    assert len(r["warnings"]) == 1, r["warnings"]  # the compile after it adds no JAX warning
    category, message = r["warnings"][0]
    assert category == "CompilationCacheWarning"
    assert str(blocker / "jaxrank" / "jax") in message and "NotADirectoryError" in message


@pytest.fixture
def restore_jax_cache_config():
    """Put JAX's cache config of this test process back after a test changes it."""
    saved = (
        jax.config.jax_compilation_cache_dir,
        jax.config.jax_persistent_cache_min_compile_time_secs,
    )
    yield
    jax.config.update("jax_compilation_cache_dir", saved[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])
    _cache._drop_initialized_cache()


def test_set_compilation_cache_switches(tmp_path, restore_jax_cache_config, monkeypatch):
    monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", raising=False)
    target = tmp_path / "a" / "b"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jaxrank.set_compilation_cache(target) == target
    assert jax.config.jax_compilation_cache_dir == str(target) and target.is_dir()
    assert jaxrank.compilation_cache_dir() == target
    assert jax.config.jax_persistent_cache_min_compile_time_secs == _cache.MIN_COMPILE_TIME_SECS
    assert jaxrank.set_compilation_cache(None) is None
    assert jax.config.jax_compilation_cache_dir is None and jaxrank.compilation_cache_dir() is None


def test_set_compilation_cache_unusable_warns_not_raises(tmp_path, restore_jax_cache_config):
    (tmp_path / "file").write_text("x")
    with pytest.warns(jaxrank.CompilationCacheWarning, match="NotADirectoryError") as rec:
        assert jaxrank.set_compilation_cache(tmp_path / "file" / "cache") is None
    assert len(rec) == 1 and jax.config.jax_compilation_cache_dir is None


def test_read_only_dir(tmp_path, restore_jax_cache_config):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        try:  # can this process write there anyway (root ignores the mode bits)?
            (ro / "x").write_bytes(b"")
            (ro / "x").unlink()
            writable = True
        except PermissionError:
            writable = False
        if writable:  # then JAX's writes succeed as well: the cache is usable
            assert jaxrank.set_compilation_cache(ro) == ro
        else:
            with pytest.warns(jaxrank.CompilationCacheWarning, match="PermissionError"):
                assert jaxrank.set_compilation_cache(ro) is None
            assert jax.config.jax_compilation_cache_dir is None
    finally:
        ro.chmod(0o700)


def test_full_disk_warns(tmp_path, restore_jax_cache_config, monkeypatch):
    monkeypatch.setattr(_cache, "_free_bytes", lambda path: _cache.MIN_FREE_BYTES - 1)
    with pytest.warns(jaxrank.CompilationCacheWarning, match="MiB free"):
        assert jaxrank.set_compilation_cache(tmp_path / "full") is None
    assert jax.config.jax_compilation_cache_dir is None


# A small fit in a fresh process; prints the modules JAX compiled and loaded from the cache.
_FIT = """
import json, logging
import numpy as np
hits = []
class H(logging.Handler):
    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("Persistent compilation cache hit for "):
            hits.append(msg.split("'")[1])
logging.getLogger("jax._src.compiler").addHandler(H())
logging.getLogger("jax._src.compiler").setLevel(logging.DEBUG)
import jax, jaxrank
jaxrank._cache.enable_default_cache()
X, y = jaxrank.datasets.make_rare_class(60, 0.2, 0.75, d=3, seed=0)
jax.block_until_ready(jaxrank.fit_rankrc(X, y, 2.0 ** -4).coef)
print(json.dumps({"hits": hits, "dir": str(jaxrank.compilation_cache_dir())}))
"""


@pytest.mark.slow
def test_second_process_loads_the_solver(tmp_path):
    env = _env(tmp_path)
    first = _run(_FIT, env, cwd=tmp_path)
    cache = Path(first["dir"])
    assert cache == tmp_path / "xdg" / "jaxrank" / "jax"
    entries = [p for p in cache.iterdir() if p.name.endswith("-cache")]
    # the fit's compiled program (jaxrank._fitting.fit_block, through its stored jax.export
    # program: jaxrank._exported)
    assert "jit_fit_block" not in first["hits"] and entries
    second = _run(_FIT, env, cwd=tmp_path)
    assert "jit_fit_block" in second["hits"], second["hits"]


def test_bound_compiled_programs_drops_only_jaxranks_programs_above_the_limit(monkeypatch):
    n = _cache.map_count()
    if n is None:
        pytest.skip("no /proc/self/maps on this platform")
    assert n > 0
    mine = jax.jit(lambda x: x + 1)  # the user's program: never dropped
    mine(jnp.ones(3))
    from jaxrank import kernels

    X = jnp.ones((4, 2))
    kernels._stream(kernels.Linear(), X, X, jnp.ones((1, 4)), 4)  # one of jaxrank's
    assert mine._cache_size() == 1 and kernels._stream._cache_size() >= 1
    monkeypatch.setattr(_cache, "_calls", 0)
    # below the limit: nothing dropped
    assert not _cache.bound_compiled_programs(n + 10_000, every=1)
    assert kernels._stream._cache_size() >= 1
    # only every `every`-th call reads the count: calls 2 and 3 of every=4 do nothing
    assert not _cache.bound_compiled_programs(0, every=4)
    assert not _cache.bound_compiled_programs(0, every=4)
    assert kernels._stream._cache_size() >= 1
    assert _cache.bound_compiled_programs(0, every=4)  # the 4th call: over the limit, dropped
    assert kernels._stream._cache_size() == 0
    assert mine._cache_size() == 1
    kernels._stream(kernels.Linear(), X, X, jnp.ones((1, 4)), 4)  # recompiles and still works
    assert kernels._stream._cache_size() == 1


def test_bound_compiled_programs_drops_the_stored_export_programs(
    tmp_path, restore_jax_cache_config, monkeypatch
):
    """The fits' jax.export programs (one per shape, held in jaxrank._exported) are dropped too:
    kept, they took a 101-set bench/keel_wide.py run past vm.max_map_count ("LLVM compilation
    error: Cannot allocate memory")."""
    if _cache.map_count() is None:
        pytest.skip("no /proc/self/maps on this platform")
    from jaxrank import _exported

    monkeypatch.delenv(_exported.DISABLE_ENV, raising=False)
    monkeypatch.setattr(_exported, "_LOADED", {})
    jaxrank.set_compilation_cache(tmp_path)
    if _exported.directory() is None:
        pytest.skip("jax.export programs cannot be stored here")
    X, y = jaxrank.datasets.make_rare_class(60, 0.2, 0.75, d=3, seed=0)
    jaxrank.fit_rankrc(X, y, 2.0**-4)
    loaded = list(_exported._LOADED.values())
    assert loaded and all(f._cache_size() >= 1 for f in loaded)
    monkeypatch.setattr(_cache, "_calls", 0)
    assert _cache.bound_compiled_programs(0, every=1)
    assert all(f._cache_size() == 0 for f in loaded)
    again = jaxrank.fit_rankrc(X, y, 2.0**-4)  # loads the program again and still fits
    assert int(np.ravel(again.info.status)[0]) == 0


def test_stored_programs_follow_the_code_of_subpackages_too(tmp_path, monkeypatch):
    # a stored program is valid only for the code that traced it: an edit anywhere in the
    # package, a subpackage's module included (jaxrank/mibc/_fit.py, ...), gives a new key
    from jaxrank import _exported

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(_exported, "__file__", str(tmp_path / "_exported.py"))
    versions = []
    for edit in (None, tmp_path / "sub" / "a.py", tmp_path / "a.py"):
        if edit is not None:
            edit.write_text("x = 2\n")
        _exported._code_version.cache_clear()
        versions.append(_exported._code_version())
    _exported._code_version.cache_clear()
    assert len(set(versions)) == 3


def test_exported_program_is_made_once_for_concurrent_callers(
    tmp_path, restore_jax_cache_config, monkeypatch
):
    """Three threads asking for the same new program export and compile it once (the threaded
    search compiled each fit program once per thread: 41 s of compilation on segment0)."""
    import threading

    from jaxrank import _exported

    monkeypatch.delenv(_exported.DISABLE_ENV, raising=False)
    monkeypatch.setattr(_exported, "_LOADED", {})
    jaxrank.set_compilation_cache(tmp_path)
    if _exported.directory() is None:
        pytest.skip("jax.export programs cannot be stored here")
    made = []
    real = jax.export.export

    def counting(f, *a, **k):
        made.append(1)
        return real(f, *a, **k)

    monkeypatch.setattr(jax.export, "export", counting)
    x = jnp.arange(64.0)
    out = [None] * 3
    go = threading.Barrier(3)

    def work(i):
        go.wait()
        out[i] = _exported.call("test_concurrent", lambda v: jnp.cumsum(v * v), (x,))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    assert len(made) == 1 and len(_exported._LOADED) == 1
    for o in out:
        np.testing.assert_array_equal(np.asarray(o[0]), np.cumsum(np.arange(64.0) ** 2))


def test_every_fit_bounds_the_compiled_programs(monkeypatch):
    seen = []
    monkeypatch.setattr(_cache, "bound_compiled_programs", lambda *a, **k: seen.append(1))
    X, y = jaxrank.datasets.make_rare_class(60, 0.2, 0.75, d=3, seed=0)
    jaxrank.fit_rankrc(X, y, 2.0**-4)
    assert seen == [1]


def test_small_blocks_compile_with_low_effort(monkeypatch):
    # a block up to LOW_EFFORT_MAX_BYTES compiles with fewer XLA passes (issue 29: compile time
    # at m = 1000), options the user set in XLA_FLAGS win; the fit is the same
    from jaxrank import _exported, _fitting

    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    assert _fitting.low_effort_options() == {"xla_cpu_use_fusion_emitters": False}
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    assert _fitting.low_effort_options() == _fitting.LOW_EFFORT_OPTIONS
    calls, call = [], _exported.call

    def spy(name, fn, args, static, compiler_options):
        calls.append((fn.keywords["low_effort"], compiler_options))
        return call(name, fn, args, static, compiler_options)

    monkeypatch.setattr(_exported, "call", spy)
    X, y = jaxrank.datasets.make_rare_class(60, 0.2, 0.75, d=3, seed=0)
    low = jaxrank.fit_rankrc(X, y, 2.0**-4)
    monkeypatch.setattr(_fitting._block, "LOW_EFFORT_MAX_BYTES", 0)  # where fit_rows reads it
    default = jaxrank.fit_rankrc(X, y, 2.0**-4)
    assert [c[0] for c in calls] == [True, False] and calls[1][1] == {}
    assert calls[0][1] and set(calls[0][1]) <= set(_fitting.LOW_EFFORT_OPTIONS)
    assert jnp.allclose(low.coef, default.coef, rtol=1e-6, atol=1e-9)


# --- damaged entries (issue 43) ---------------------------------------------------------------

# A small fit in a fresh process: its coefficients and objective as hex bytes, and every warning.
_FIT_BITS = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import jax, numpy as np, jaxrank
    jaxrank._cache.enable_default_cache()
    X, y = jaxrank.datasets.make_rare_class(60, 0.2, 0.75, d=3, seed=0)
    model = jaxrank.fit_rankrc(X, y, 2.0 ** -4)
    bits = [np.asarray(a).tobytes().hex() for a in (model.coef, model.info.objective)]
print(json.dumps({"bits": bits, "warnings": [[w.category.__name__, str(w.message)]
                                             for w in caught]}))
"""

DAMAGES = ("flip", "truncate", "random", "empty")


def _damage(path: Path, kind: str) -> None:
    blob = bytearray(path.read_bytes())
    if kind == "flip":
        blob[len(blob) // 2] ^= 0xFF
    elif kind == "truncate":
        blob = blob[: len(blob) // 2]
    elif kind == "random":
        blob = bytearray(np.random.default_rng(len(blob)).bytes(len(blob)))
    else:
        blob = bytearray()
    path.write_bytes(bytes(blob))


def _stored(cache: Path) -> list[Path]:
    """Every stored program and cache entry (JAX's executables and jaxrank's exported programs)."""
    files = sorted(cache.glob("*-cache")) + sorted((cache / "jaxrank-exported").glob("*"))
    return [f for f in files if f.is_file()]


def _fit_after_damage(tmp_path: Path, kinds) -> None:
    """Fit, damage every stored file (file i by ``kinds[i % len(kinds)]``), fit again in a fresh
    process (the cache in place: JAX's keys depend on its directory): the same bits, at most one
    warning, and every entry sealed and intact afterwards."""
    env = _env(tmp_path)
    clean = _run(_FIT_BITS, env, cwd=tmp_path)
    assert clean["warnings"] == []
    cache = tmp_path / "xdg" / "jaxrank" / "jax"
    files = _stored(cache)
    assert any(f.suffix == ".jaxexport" for f in files) and any(f.name.endswith("-cache")
                                                               for f in files)  # fmt: skip
    for i, f in enumerate(files):
        _damage(f, kinds[i % len(kinds)])
    again = _run(_FIT_BITS, env, cwd=tmp_path)
    assert again["bits"] == clean["bits"]
    assert len(again["warnings"]) <= 1, again["warnings"]
    assert all(w[0] == "CompilationCacheWarning" and "damaged" in w[1] for w in again["warnings"])
    for f in _stored(cache):  # rewritten whole: nothing damaged is left to trust
        assert _cache.unseal(f.read_bytes()) is not None, f


@pytest.mark.slow  # fresh processes on a damaged cache
def test_damaged_cache_costs_a_recompile_not_a_fit(tmp_path):
    # one flipped byte in a stored jax.export program made every later fit fail ("Failed to
    # deserialize StableHLO"): each kind of damage, spread over every stored file
    _fit_after_damage(tmp_path, DAMAGES)


@pytest.mark.slow
@pytest.mark.parametrize("kind", DAMAGES)
def test_every_file_damaged_the_same_way(tmp_path, kind):
    _fit_after_damage(tmp_path, (kind,))


def test_seal_refuses_every_damage():
    payload = bytes(range(256)) * 8
    blob = _cache.seal(payload)
    assert _cache.unseal(blob) == payload
    for kind in DAMAGES:
        path_blob = bytearray(blob)
        if kind == "flip":
            for at in (0, len(_cache.SEAL_MAGIC) + 3, len(blob) - 1):  # tag, checksum, payload
                damaged = bytearray(blob)
                damaged[at] ^= 1
                assert _cache.unseal(bytes(damaged)) is None
            continue
        if kind == "truncate":
            path_blob = path_blob[:-1]
        elif kind == "random":
            path_blob = bytearray(np.random.default_rng(0).bytes(len(blob)))
        else:
            path_blob = bytearray()
        assert _cache.unseal(bytes(path_blob)) is None, kind
    assert _cache.unseal(payload) is None  # written without a seal: not trusted either


def test_damaged_exported_program_is_removed_with_one_warning(tmp_path, monkeypatch):
    from jaxrank import _exported

    monkeypatch.setattr(_cache, "_damage_warned", False)
    x = jnp.arange(8.0)
    exp = jax.export.export(jax.jit(lambda v: [v * 2]))(jax.ShapeDtypeStruct((8,), x.dtype))
    paths = [tmp_path / f"p{i}.jaxexport" for i in range(3)]
    for path, kind in zip(paths, ("flip", "truncate", "empty"), strict=True):
        _exported._store(path, exp.serialize())
        assert _exported._load(path) is not None
        _damage(path, kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [_exported._load(p) for p in paths] == [None] * 3
    assert len(caught) == 1 and issubclass(caught[0].category, jaxrank.CompilationCacheWarning)
    assert not any(p.exists() for p in paths)  # removed: exported and stored again next time


def test_concurrent_writers_leave_one_complete_file(tmp_path):
    import threading

    target = tmp_path / "entry"
    payloads = [bytes([i]) * (50_000 + i) for i in range(8)]
    go = threading.Barrier(len(payloads))

    def write(p):
        go.wait()
        for _ in range(5):
            assert _cache.write_sealed(target, p)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert _cache.unseal(target.read_bytes()) in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]  # no temporary file left


def test_killed_writer_leaves_nothing_trusted(tmp_path, restore_jax_cache_config, monkeypatch):
    # a writer killed mid-write leaves its temporary file (never the entry's name): no reader
    # looks at it, and the next process that opens the cache removes it once it is a day old
    jaxrank.set_compilation_cache(tmp_path)
    from jax._src import compilation_cache as jcc

    key = "jit_f-" + "0" * 64
    half = _cache.seal(b"x" * 1000)[:500]
    (tmp_path / f".{key}-sealed-cache.abc{_cache._TMP_SUFFIX}").write_bytes(half)
    assert jcc._cache.get(key) is None
    jcc._cache.put(key, b"program")
    assert jcc._cache.get(key) == b"program"
    old = time.time() - _cache._STALE_TMP_SECONDS - 10
    for t in tmp_path.glob(f".*{_cache._TMP_SUFFIX}"):
        os.utime(t, (old, old))
    jaxrank.set_compilation_cache(tmp_path)
    assert not list(tmp_path.glob(f".*{_cache._TMP_SUFFIX}"))


def test_damaged_jax_entry_is_a_miss_and_is_rewritten(tmp_path, restore_jax_cache_config,
                                                      monkeypatch):  # fmt: skip
    monkeypatch.setattr(_cache, "_damage_warned", False)
    jaxrank.set_compilation_cache(tmp_path)
    from jax._src import compilation_cache as jcc

    key = "jit_g-" + "1" * 64
    jcc._cache.put(key, b"executable")
    (entry,) = tmp_path.glob("*-cache")
    _damage(entry, "flip")
    with pytest.warns(jaxrank.CompilationCacheWarning, match="damaged compiled program"):
        assert jcc._cache.get(key) is None
    assert not entry.exists()
    jcc._cache.put(key, b"executable")  # JAX writes it again after compiling
    assert jcc._cache.get(key) == b"executable"
