"""Your own experiment: a C kernel file built, cached, loaded and measured as a family (memlab.userkernel)."""

import os
import shutil
import sys
from pathlib import Path

import pytest

import memlab
from memlab import _core, cli, registry, userkernel, worker
from memlab.dataset import Dataset, DatasetError
from memlab.grid import Sweep, grid
from memlab.sweep import run_sweep

from conftest import interrupt_measure, memlab_thread_count

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
WALK = ROOT / "examples" / "kernels" / "walk.c"

# A kernel that reports which source it was built from (VERSION) and fails its setup on request.
VERSIONED = r'''
#include <stdlib.h>
#include "memlab_kernel.h"
#define VERSION %d
typedef struct { int64_t n; double scale; int refuse; int mode; } cfg;
static const char *const modes[] = {"plain", "fancy", NULL};
static const mlk_param params[] = {
    MLK_INT(cfg, n, 1, 1000, 10, "", "additions per iteration"),
    MLK_FLOAT(cfg, scale, 0.5, 2.0, 1.0, "", "a factor"),
    MLK_BOOL(cfg, refuse, 0, "fail the setup"),
    MLK_CHOICE(cfg, mode, modes, "plain", "a word"),
    {0},
};
static int setup(const void *config, void **state, mlk_host *host)
{
    const cfg *c = config;
    if (c->refuse)
        return mlk_fail(host, MLK_ERR_VALUE, "refuse=true: the setup says no (n=%%lld)", (long long)c->n);
    cfg *copy = malloc(sizeof *copy);
    if (!copy)
        return mlk_fail(host, MLK_ERR_MEMORY, "no memory");
    *copy = *c;
    *state = copy;
    return 0;
}
static int measure(void *state, uint64_t iterations, mlk_sample *sample, mlk_host *host)
{
    const cfg *c = state;
    uint64_t x = 0;
    for (uint64_t i = 0; i < iterations * (uint64_t)c->n; i++) {
        x += i;
        mlk_keep(x);
    }
    sample->units = (double)iterations * (double)c->n;
    host->metric(host, "version", VERSION);
    host->metric(host, "mode_index", c->mode);
    host->metric(host, "scale_seen", c->scale);
    return 0;
}
static void teardown(void *state) { free(state); }
MEMLAB_KERNEL = {.name = "versioned", .description = "adds", .config_size = sizeof(cfg), .params = params,
                 .unit = "addition", .setup = setup, .measure = measure, .teardown = teardown};
'''

# Two threads of memlab's team, each counting until told to stop.
TEAM = r'''
#include "memlab_kernel.h"
typedef struct { int64_t threads; } cfg;
static const mlk_param params[] = {MLK_INT(cfg, threads, 1, 64, 2, "", "threads counting"), {0}};
typedef struct { uint64_t counts[64]; } tally;
static void body(void *arg, int index, mlk_team *team)
{
    tally *t = arg;
    while (!mlk_team_stopping(team))
        for (int i = 0; i < 1000; i++)
            t->counts[index]++;
}
static int measure(void *state, uint64_t iterations, mlk_sample *sample, mlk_host *host)
{
    (void)iterations;
    const cfg *c = state;
    tally t = {{0}};
    uint64_t elapsed = 0;
    if (host->team_run(host, (int)c->threads, NULL, body, &t, 20000000ull, &elapsed) < 0)
        return -1;
    double total = 0;
    for (int i = 0; i < c->threads; i++)
        total += (double)t.counts[i];
    sample->units = total;
    sample->elapsed_ns = elapsed;
    return 0;
}
MEMLAB_KERNEL = {.name = "team_count", .description = "threads counting", .config_size = sizeof(cfg),
                 .params = params, .unit = "count", .measure = measure};
'''


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    """One cache directory for the module's builds (a source built once is found by the next test)."""
    return tmp_path_factory.mktemp("kernel-cache")


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch, kernel_cache):
    """Kernel families registered by a test leave with it; builds go to the module's cache."""
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    monkeypatch.setenv("MEMLAB_CACHE_DIR", str(kernel_cache))


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_header_is_installed_and_its_directory_is_printed(capsys):
    assert (Path(memlab.include_dir()) / "memlab_kernel.h").is_file()
    assert cli.main(["--include"]) == 0
    assert capsys.readouterr().out.strip() == memlab.include_dir()
    assert f"ML_KERNEL_API_VERSION {userkernel.API_VERSION}" in (Path(memlab.include_dir()) / "memlab_kernel.h").read_text()


def test_a_kernel_built_in_a_temporary_directory_is_measured(tmp_path):
    source = tmp_path / "walk.c"
    shutil.copy(WALK, source)
    m = memlab.run(str(source), size_bytes=64 << 10, layout="list", repeat=2, warmup=1, target_seconds=0.02)
    assert m.family == "walk" and m.params == {"size_bytes": 64 << 10, "layout": "list"}
    assert m.primary_metric == "ns_per_element"
    assert m.median("ns_per_element") > 0 and m.median("GB_per_s") > 0
    for sample in m.samples:  # the harness ran calls until the target; the kernel counted its elements
        assert sample["elapsed_ns"] >= 0.02e9
        assert sample["calls_per_sample"] >= 1
    assert sorted(os.listdir(tmp_path)) == ["walk.c"]  # nothing beside the source
    assert registry.check_declarations(registry.family("walk")) == []  # what a plugin family must declare
    assert registry.origin("walk") == "registered"
    assert registry.family("walk").metadata["kernel_sha256"] == userkernel.build(source).kernel_sha256


def test_parameters_are_checked_with_their_names_and_ranges(tmp_path):
    fam = userkernel.kernel_family(write(tmp_path, "v.c", VERSIONED % 1))
    with pytest.raises(ValueError, match=r"^n=0 is below the minimum 1"):
        fam.run(n=0)
    with pytest.raises(ValueError, match=r"scale=3(\.0)? is above the maximum 2"):
        fam.run(scale=3.0)
    with pytest.raises(ValueError, match=r"mode='odd' is not one of"):
        fam.run(mode="odd")
    with pytest.raises(ValueError, match=r"unknown parameter 'nn' .*did you mean 'n'"):
        fam.run(nn=3)
    with pytest.raises(ValueError, match=r"refuse=true: the setup says no \(n=7\)"):
        fam.run(n=7, refuse=True, repeat=1, warmup=0, target_seconds=0.001)
    m = fam.run(n=5, scale=1.5, mode="fancy", repeat=1, warmup=0, target_seconds=0.001)
    assert m.median("mode_index") == 1 and m.median("scale_seen") == 1.5
    specs = {spec.name: spec for spec in fam.describe_params()}
    assert specs["n"].help == "additions per iteration." and specs["n"].allowed == "1 .. 1,000"
    assert specs["mode"].allowed == "plain, fancy" and specs["refuse"].type == "bool"


def test_the_cache_serves_a_build_only_for_the_same_source(tmp_path, kernel_cache):
    source = write(tmp_path, "v.c", VERSIONED % 1)
    first = userkernel.build(source)
    again = userkernel.build(source)
    assert again.cached and again.shared_object == first.shared_object
    assert first.shared_object.parent == kernel_cache / "kernels"
    assert memlab.run(str(source), repeat=1, warmup=0, target_seconds=0.001).median("version") == 1
    source.write_text(VERSIONED % 2)  # edited: a new build, never the stale one
    changed = userkernel.build(source)
    assert not changed.cached and changed.shared_object != first.shared_object
    assert changed.kernel_sha256 != first.kernel_sha256
    assert memlab.run(str(source), repeat=1, warmup=0, target_seconds=0.001).median("version") == 2
    assert registry.family("versioned").metadata["kernel_sha256"] == changed.kernel_sha256


def test_the_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLAB_CACHE_DIR", str(tmp_path / "chosen"))
    assert userkernel.cache_dir() == tmp_path / "chosen"
    monkeypatch.delenv("MEMLAB_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert userkernel.cache_dir() == tmp_path / "xdg" / "memlab"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert userkernel.cache_dir() == tmp_path / "home" / ".cache" / "memlab"


def test_a_compile_error_names_the_file_and_line(tmp_path, capsys):
    text = (VERSIONED % 1).replace("x += i;", "x += undeclared_thing;")
    source = write(tmp_path, "broken.c", text)
    line = text[: text.index("undeclared_thing")].count("\n") + 1
    with pytest.raises(userkernel.KernelBuildError, match=rf"^{source}:{line}: the kernel broken.c does not compile") as info:
        userkernel.kernel_family(source)
    assert "error:" in str(info.value) and str(info.value).count("\n") <= userkernel.ERROR_LINES
    assert isinstance(info.value, ValueError)
    assert cli.main(["run", str(source)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memlab: error: ") and f"{source}:{line}" in err
    assert not list((userkernel.cache_dir() / "kernels").glob("broken-*"))  # no half build left in the cache


BAD_KERNELS = {
    "no kernel": ('#include "memlab_kernel.h"\nint unrelated = 1;\n', r"defines no memlab kernel: end the file with MEMLAB_KERNEL"),
    "misspelled entry point": (
        '#include "memlab_kernel.h"\n__attribute__((visibility("default"))) const mlk_kernel memlab_kernal = {0};\n',
        r"defines no memlab kernel"),
    "no measure": ('#include "memlab_kernel.h"\nstatic const mlk_param p[] = {{0}};\n'
                   'MEMLAB_KERNEL = {.name = "nomeasure", .params = p};\n', r"kernel nomeasure has no measure function \(\.measure"),
    "no parameter table": (
        '#include "memlab_kernel.h"\nstatic int m(void *s, uint64_t n, mlk_sample *o, mlk_host *h) '
        '{(void)s; (void)n; (void)o; (void)h; return 0;}\nMEMLAB_KERNEL = {.name = "noparams", .measure = m};\n',
        r"kernel noparams has no parameter table \(\.params"),
    "another API version": (
        '#include "memlab_kernel.h"\nstatic int m(void *s, uint64_t n, mlk_sample *o, mlk_host *h) '
        '{(void)s; (void)n; (void)o; (void)h; return 0;}\nstatic const mlk_param p[] = {{0}};\n'
        '__attribute__((visibility("default"))) const int memlab_kernel_api_version = 99;\n'
        '__attribute__((visibility("default"))) const mlk_kernel memlab_kernel = {.name = "old", .params = p, .measure = m};\n',
        r"compiled against memlab kernel API version 99; this memlab takes version 1"),
    "a default out of its range": (
        '#include "memlab_kernel.h"\ntypedef struct { int64_t n; } c;\n'
        'static const mlk_param p[] = {MLK_INT(c, n, 1, 10, 50, "", "n"), {0}};\n'
        'static int m(void *s, uint64_t n, mlk_sample *o, mlk_host *h) {(void)s; (void)n; (void)o; (void)h; return 0;}\n'
        'MEMLAB_KERNEL = {.name = "badrange", .config_size = sizeof(c), .params = p, .measure = m};\n',
        r"parameter n: its default 50 is not in its range \[1, 10\]"),
    "a config too small": (
        '#include "memlab_kernel.h"\ntypedef struct { int64_t n; } c;\n'
        'static const mlk_param p[] = {MLK_INT(c, n, 1, 10, 5, "", "n"), {0}};\n'
        'static int m(void *s, uint64_t n, mlk_sample *o, mlk_host *h) {(void)s; (void)n; (void)o; (void)h; return 0;}\n'
        'MEMLAB_KERNEL = {.name = "nosize", .params = p, .measure = m};\n',
        r"parameter n lies outside the config .*set \.config_size = sizeof"),
    "a built-in family's name": (
        '#include "memlab_kernel.h"\nstatic const mlk_param p[] = {{0}};\n'
        'static int m(void *s, uint64_t n, mlk_sample *o, mlk_host *h) {(void)s; (void)n; (void)o; (void)h; return 0;}\n'
        'MEMLAB_KERNEL = {.name = "chase", .params = p, .measure = m};\n',
        r"kernel chase has the name of one of memlab's own families"),
}


@pytest.mark.parametrize("case", sorted(BAD_KERNELS))
def test_a_bad_kernel_is_named_for_what_it_lacks(tmp_path, case):
    text, message = BAD_KERNELS[case]
    source = write(tmp_path, "bad.c", text)
    with pytest.raises(ValueError, match=message):
        userkernel.kernel_family(source)


def test_a_missing_file_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(FileNotFoundError):
        userkernel.kernel_family(tmp_path / "absent.c")
    assert cli.main(["run", str(tmp_path / "absent.c")]) == 2
    assert "absent.c does not exist" in capsys.readouterr().err


def test_memlab_run_file_measures_and_lists_its_parameters(tmp_path, capsys):
    source = tmp_path / "walk.c"
    shutil.copy(WALK, source)
    assert cli.main(["run", str(source), "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "size_bytes" in help_text and "4KiB .. 4GiB" in help_text and "memory walked." in help_text
    out = tmp_path / "one.csv"
    assert cli.main(["run", str(source), "size_bytes=16KiB", "--repeat", "1", "--warmup", "0",
                     "--out", str(out)]) == 0
    data = Dataset.load(out)
    assert data.rows[0]["size_bytes"] == 16 << 10 and data.rows[0]["ns_per_element"] > 0
    assert data.metadata["kernel_sha256"] == userkernel.build(source).kernel_sha256
    assert data.metadata["kernel"]["cflags"] == " ".join(userkernel.compiler_command()[1])
    assert cli.main(["run", str(source), "size_bytes=1"]) == 2
    assert "size_bytes=1 is below the minimum 4096" in capsys.readouterr().err


def test_a_sweep_is_resumed_after_an_interrupt_and_refused_for_another_source(tmp_path):
    source = write(tmp_path, "v.c", VERSIONED % 1)
    fam = userkernel.kernel_family(source)
    sweep = Sweep("ns", fam.name, grid(n=[1, 2, 3, 4]), repeat=1, warmup=0, target_seconds=0.002, runs=1)
    out = tmp_path / "sweep.csv"
    seen = []

    def stop_after_two(point, row):
        seen.append(point["n"])
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, out, progress=False, on_point=stop_after_two)
    assert [row["n"] for row in Dataset.load(out).rows] == [1, 2]
    measured = []
    data = run_sweep(sweep, out, progress=False, on_point=lambda point, row: measured.append((point["n"], row is None)))
    assert [row["n"] for row in data.rows] == [1, 2, 3, 4]
    assert measured == [(1, True), (2, True), (3, False), (4, False)]  # the first two found on disk
    assert Dataset.load(out).metadata["kernel_sha256"] == fam.metadata["kernel_sha256"]
    source.write_text(VERSIONED % 2)
    userkernel.kernel_family(source)
    with pytest.raises(DatasetError, match="kernel_sha256"):
        run_sweep(sweep, out, progress=False)


def test_the_default_figure_draws_the_primary_metric_over_the_first_swept_parameter(tmp_path):
    pytest.importorskip("matplotlib")
    from memlab import plot

    fam = userkernel.kernel_family(write(tmp_path, "v.c", VERSIONED % 1))
    data = run_sweep(Sweep("ns", fam.name, grid(n=[1, 4, 16], mode=["plain", "fancy"]), repeat=2, warmup=0,
                           target_seconds=0.002), tmp_path / "s.csv", progress=False)
    figure = plot.figure(data)
    axes = figure.axes[0]
    assert axes.get_xlabel().startswith("n") and "addition" in axes.get_ylabel()
    assert len(axes.get_lines()) >= 2  # one line per mode


def test_ctrl_c_stops_a_long_user_kernel_sample():
    fam = userkernel.kernel_family(WALK)
    kernel = _core.Kernel(fam.core, {"size_bytes": 1 << 20, "layout": "list"})
    interrupt_measure(kernel)
    assert memlab_thread_count() == 0


def test_the_thread_team_runs_measures_and_stops_on_ctrl_c(tmp_path):
    fam = userkernel.kernel_family(write(tmp_path, "team.c", TEAM))
    m = fam.run(threads=2, repeat=2, warmup=0, target_seconds=0.02)
    assert m.median("counts_per_s") > 0
    assert 0 <= m.median("overlap_fraction") <= m.median("lowest_cpu_fraction") <= m.median("cpu_fraction") <= 1
    assert memlab_thread_count() == 0
    interrupt_measure(_core.Kernel(fam.core, {"threads": 2}))
    assert memlab_thread_count() == 0


CRASH = r'''
#include <signal.h>
#include <stdlib.h>
#include "memlab_kernel.h"
typedef struct { int how; } cfg;
static const char *const hows[] = {"segv", "abort", "none", NULL};
static const mlk_param params[] = {MLK_CHOICE(cfg, how, hows, "none", "how the measure ends"), {0}};
static int measure(void *state, uint64_t iterations, mlk_sample *sample, mlk_host *host)
{
    (void)iterations; (void)host;
    const cfg *c = state;
    if (c->how == 0)
        raise(SIGSEGV);
    if (c->how == 1)
        abort();
    sample->elapsed_ns = 1000;
    return 0;
}
MEMLAB_KERNEL = {.name = "crasher", .description = "crashes on request", .config_size = sizeof(cfg),
                 .params = params, .measure = measure};
'''


@pytest.fixture
def crashes_reach_the_parent(monkeypatch):
    """Under AddressSanitizer (MEMLAB_SANITIZE=address, docs/architecture.md) the worker's SIGSEGV
    stays a signal instead of ASan's report and exit status 1; without ASan the option is unread."""
    options = os.environ.get("ASAN_OPTIONS", "")
    monkeypatch.setenv("ASAN_OPTIONS", f"{options}:handle_segv=0" if options else "handle_segv=0")


@pytest.mark.parametrize("how, signal_name", [("segv", "SIGSEGV"), ("abort", "SIGABRT")])
def test_an_isolated_kernel_that_crashes_is_a_failure_naming_the_signal(tmp_path, how, signal_name,
                                                                       crashes_reach_the_parent):
    source = write(tmp_path, "crash.c", CRASH)
    with pytest.raises(worker.WorkerFailed, match=rf"crasher how={how} run 0: the worker process was killed by {signal_name}"):
        memlab.run(str(source), how=how, isolate=True, repeat=1, warmup=0, target_seconds=0.001)
    m = memlab.run(str(source), how="none", isolate=True, repeat=2, warmup=0, target_seconds=0.001)
    assert m.params == {"how": "none"} and len(m.samples) == 2
    assert m.context["worker_pid"] != os.getpid()


def test_memlab_run_file_isolates_by_default(tmp_path, capsys, crashes_reach_the_parent):
    source = write(tmp_path, "crash.c", CRASH)
    assert cli.main(["run", str(source), "how=segv", "--repeat", "1", "--warmup", "0"]) == 1
    assert "killed by SIGSEGV" in capsys.readouterr().err
    out = tmp_path / "ok.csv"
    assert cli.main(["run", str(source), "how=none", "--repeat", "1", "--warmup", "0", "--out", str(out)]) == 0
    row = Dataset.load(out).rows[0]
    assert row["how"] == "none" and row["context_worker_pid"] != os.getpid()
    assert cli.main(["run", str(source), "how=none", "--repeat", "1", "--warmup", "0", "--no-isolate", "--json"]) == 0
    assert "context_worker_pid" not in capsys.readouterr().out


def test_a_sweep_in_worker_processes_survives_a_crashing_point(tmp_path, crashes_reach_the_parent):
    fam = userkernel.kernel_family(write(tmp_path, "crash.c", CRASH))
    sweep = Sweep("hows", fam.name, grid(how=["none", "segv"]), repeat=1, warmup=0, target_seconds=0.001, runs=1)
    out = tmp_path / "hows.csv"
    with pytest.raises(worker.WorkerFailed, match="killed by SIGSEGV"):
        run_sweep(sweep, out, progress=False, processes=True, warn=lambda text: None)
    data = Dataset.load(out)
    assert [row["how"] for row in data.rows] == ["none"]
    assert [(f["point"]["how"], f["reason"]) for f in data.metadata["failed_runs"]] == [("segv", "was killed by SIGSEGV")]


PLUGIN = '''
from dataclasses import dataclass

from memlab.family import Family, check_int, coerce_fields
from memlab.grid import Sweep


@dataclass(frozen=True)
class ToyParams:
    """``budget_ns``: how long one calibration sample runs."""

    budget_ns: int = 2_000_000

    def __post_init__(self):
        coerce_fields(self)
        check_int("budget_ns", self.budget_ns, 1_000_000, 10_000_000)


def _figure(data):
    from memlab import chart
    return chart.generic_figure(data)


FAMILY = Family(name="toy_clock", params_type=ToyParams, core="calibrate", primary_metric="core_GHz",
                sweeps={"quick": lambda: Sweep("quick", "toy_clock", [{"budget_ns": 2_000_000}], repeat=1)},
                description="a plugin's family on the calibrate kernel", figure=_figure, default_warmup=0)

INCOMPLETE = Family(name="toy_incomplete", params_type=ToyParams, core="calibrate", figure=_figure)


def kernel_files():
    import memlab.userkernel
    return memlab.userkernel.kernel_family(__import__("os").environ["TOY_KERNEL_FILE"])
'''


@pytest.fixture
def plugin_package(tmp_path, monkeypatch):
    """A throw-away installed package (its module and a dist-info with entry points on sys.path)."""
    site = tmp_path / "site"
    (site / "toyplugin").mkdir(parents=True)
    (site / "toyplugin" / "__init__.py").write_text(PLUGIN)
    info = site / "toyplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[memlab.families]\ntoy = toyplugin:FAMILY\nincomplete = toyplugin:INCOMPLETE\n"
        "kernels = toyplugin:kernel_files\nbroken = toyplugin:ABSENT\n")
    kernel = tmp_path / "shipped.c"
    kernel.write_text((VERSIONED % 3).replace('.name = "versioned"', '.name = "shipped"'))
    monkeypatch.setenv("TOY_KERNEL_FILE", str(kernel))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "_PLUGINS", None)
    yield site
    sys.modules.pop("toyplugin", None)
    registry._PLUGINS = None


def test_a_plugin_family_from_an_entry_point_is_checked_and_listed(plugin_package, capsys):
    with pytest.warns(registry.PluginFamilyWarning) as caught:
        families = registry.all_families()
    messages = sorted(str(w.message) for w in caught)
    assert any("family 'toy_incomplete' of entry point incomplete of toyplugin is left out: no primary_metric; "
               "no 'quick' sweep" in m for m in messages), messages
    assert any("entry point broken of toyplugin (toyplugin:ABSENT) does not load: AttributeError" in m for m in messages)
    assert "toy_clock" in families and "shipped" in families and "toy_incomplete" not in families
    assert registry.origin("toy_clock") == "entry point toy of toyplugin"
    assert registry.origin("shipped") == "entry point kernels of toyplugin"
    assert memlab.run("toy_clock", repeat=1).median("core_GHz") > 0
    assert memlab.run("shipped", repeat=1, warmup=0, target_seconds=0.001).median("version") == 3
    assert cli.main(["run", "--help"]) == 0
    assert "toy_clock" in capsys.readouterr().out
    assert cli.main(["sweep", "--list"]) == 0
    listing = capsys.readouterr().out
    assert "toy_clock.quick" in listing and "shipped.quick" in listing


def test_a_plugin_may_not_take_a_name_of_memlabs(plugin_package):
    (plugin_package / "toyplugin" / "__init__.py").write_text(PLUGIN.replace('name="toy_clock"', 'name="chase"'))
    with pytest.warns(registry.PluginFamilyWarning, match="family 'chase' of entry point toy of toyplugin is left out: its name 'chase' is taken by memlab"):
        families = registry.all_families()
    assert families["chase"] is registry.family_module("chase").FAMILY


GUARD = '''
import os

import memlab
from memlab.grid import Sweep


def test_kernel_speed(memlab_regression):
    family = memlab.kernel_family(os.environ["GUARD_KERNEL"])
    memlab_regression.check(Sweep("guard", family.name, memlab.grid(n=[100, 1000]), repeat=7, warmup=1,
                                  target_seconds=0.01))
'''


def test_the_pytest_guard_fails_a_doctored_baseline_and_another_source(pytester, monkeypatch, tmp_path):
    """The guard fails a baseline measured with another source of the kernel file, and a
    baseline twice as fast as this kernel runs (the fastest of three recordings, doctored). The
    doctored case follows the retry-or-measured-skip rule of guard_fails_doctored, as the doctored
    chase baseline does (a single cycle was seen passing it as inconclusive at load ~25), so it
    comes last: a skip there leaves the source check already done."""
    from memlab.pytest_plugin import baseline_stem

    from test_pytest_plugin import PLUGIN_ARGS, guard_fails_doctored

    source = write(tmp_path, "guarded.c", VERSIONED % 1)
    monkeypatch.setenv("GUARD_KERNEL", str(source))
    pytester.makepyfile(test_kernel_guard=GUARD)
    path = pytester.path / "memlab-baselines" / f"{baseline_stem('test_kernel_guard.py::test_kernel_speed')}.csv"
    pytester.runpytest(*PLUGIN_ARGS, "--memlab-save-baseline").assert_outcomes(passed=1)
    assert Dataset.load(path).metadata["kernel_sha256"] == userkernel.build(source).kernel_sha256
    source.write_text(VERSIONED % 2)  # another source: the baseline is not its baseline
    result = pytester.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*was measured with another source of the kernel (kernel_sha256 *"])
    source.write_text(VERSIONED % 1)
    result = guard_fails_doctored(pytester, path, "ns_per_addition", 2.0, "test_kernel_guard.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*memlab_regression: * significant regression(s) of at least 5.0% against *"])


def test_the_docs_example_kernel_builds_and_measures(tmp_path):
    import re

    text = (ROOT / "docs" / "own-kernel.md").read_text()
    block = re.search(r"A 30-line kernel.*?```c\n(.*?)```", text, flags=re.S).group(1)
    assert len(block.splitlines()) <= 36
    fam = userkernel.kernel_family(write(tmp_path, "strided.c", block))
    m = fam.run(size_bytes=4096, stride_bytes=64, repeat=2, warmup=0, target_seconds=0.002)
    assert m.primary_metric == "ns_per_read" and m.median("reads_per_s") > 0
    with pytest.raises(ValueError, match=r"stride_bytes=4 is below the minimum 8"):
        fam.run(stride_bytes=4)


def test_memlab_plot_draws_a_kernel_dataset_where_the_kernel_is_not_built(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from memlab import plot

    fam = userkernel.kernel_family(write(tmp_path, "v.c", VERSIONED % 1))
    out = tmp_path / "two.csv"
    run_sweep(Sweep("ns", fam.name, grid(n=[1, 8]), repeat=2, warmup=0, target_seconds=0.002, runs=1), out,
              progress=False)
    monkeypatch.setattr(registry, "_REGISTERED", {})  # another process: the family is not registered there
    assert "versioned" not in registry.all_families()
    axes = plot.figure(Dataset.load(out)).axes[0]
    assert axes.get_xlabel().startswith("n") and len(axes.get_lines()) == 1  # a line over n, not bars


def test_the_bare_comparator_builds_and_walks_the_same_file(tmp_path):
    import importlib.util

    if shutil.which("taskset") is None:
        pytest.skip("taskset (util-linux), which the script pins the bare program with, is not installed")

    spec = importlib.util.spec_from_file_location("own_kernel_vs_bare", ROOT / "experiments" / "own_kernel_vs_bare.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    program = script.bare_program(tmp_path)
    cpu = sorted(os.sched_getaffinity(0))[0]
    for layout in ("array", "list"):
        wall, on_cpu = script.bare(program, layout, 16 << 10, 0.002, cpu)
        assert wall > 0 and on_cpu > 0
    memlab_wall, memlab_on_cpu = script.harness("list", 16 << 10, 0.002, cpu)
    assert memlab_wall > 0 and memlab_on_cpu > 0
