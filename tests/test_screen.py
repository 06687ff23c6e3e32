"""The static screen: every shipped kernel passes it, every construct it exists for is refused with a reason."""

from __future__ import annotations

import pytest
from sampling import uniform_points

from ksci.evaluate.options import EvaluationOptions
from ksci.evaluate.results import Status
from ksci.evaluate.screen.source import screen_source
from ksci.evaluate.stage_order import evaluate_source
from ksci.problem.render import render_kernel
from ksci.problem.spec import list_problems, load_problem

ADVERSARIAL = sorted(load_problem("fp8_gemm").solutions("adversarial"))


def _template_points():
    """Each template's default and up to six other points of its parameter space (fixed sample)."""
    for name in list_problems():
        for template in load_problem(name).templates:
            points = [template.default] + uniform_points(template, 6, f"{name}/{template.name}")
            for i, params in enumerate(points):
                yield pytest.param(template, params, id=f"{name}-{template.dialect}-{template.name}-{i}")


@pytest.mark.parametrize(("template", "params"), list(_template_points()))
def test_every_seed_template_passes(template, params):
    try:
        source = render_kernel(template, params)
    except Exception:  # noqa: BLE001 - a point the template itself rules out (e.g. #error) is not the screen's
        pytest.skip("parameter point refused by the template")
    result = screen_source(source)
    assert result.ok, result.message


def _solutions():
    for name in list_problems():
        for kind in ("correct", "wrong"):
            for path in load_problem(name).solutions(kind):
                yield pytest.param(path, id=f"{name}-{kind}-{path.name}")


@pytest.mark.parametrize("path", list(_solutions()))
def test_every_shipped_solution_passes(path):
    result = screen_source(path.read_text())
    assert result.ok, result.message


@pytest.mark.parametrize("path", ADVERSARIAL, ids=[p.name for p in ADVERSARIAL])
def test_adversarial_kernels_are_screened_as_they_say(path):
    text = path.read_text()
    expected = set(text.splitlines()[0].split("expect:")[1].strip().split("|"))
    result = screen_source(text)
    if "rejected" in expected:
        assert not result.ok and result.reason and result.line > 0 and result.text
    else:  # meant to reach the GPU, where the harness's dynamic checks must catch it
        assert result.ok, result.message


KERNEL = 'extern "C" int f(void* c, int n, void* stream) {{\n    {body}\n    return 0;\n}}\n'


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("cudaStream_t s; cudaStreamCreate(&s);", "stream"),
        ("cudaStream_t s; hipStreamCreateWithFlags(&s, 1);", "stream"),
        ("cudaEvent_t e; cudaEventCreate(&e);", "event"),
        ("cudaEventRecord(nullptr, 0);", "event"),
        ("cudaGraph_t g; cudaGraphCreate(&g, 0);", "graph"),
        ("cudaLaunchHostFunc((cudaStream_t)stream, nullptr, nullptr);", "host code"),
        ("k<<<1, 1, 0, cudaStreamPerThread>>>();", "stream other than the one given"),
        ("struct timespec t; clock_gettime(0, &t);", "clock"),
        ("auto t = std::chrono::steady_clock::now();", "clock"),
        ("void* p = dlsym(RTLD_DEFAULT, nullptr);", "by name"),
        ('void* p = cuGetProcAddress("x", nullptr, 0, 0);', "by name"),
        ('FILE* f = fopen("x", "w");', "files"),
        ("int fd = open(0, 0);", "files"),
        ('write(1, "x", 1);', "file descriptors"),
        ("std::ofstream out;", "files"),
        ("socket(2, 1, 0);", "network"),
        ('const char* k = getenv("OPENAI_API_KEY");', "environment"),
        ('std::system("ls");', "process"),
        ("fork();", "process"),
        ("kill(1, 9);", "process"),
        ("signal(15, nullptr);", "process"),
        ('asm volatile("syscall");', "system call"),
        ('unsigned lo, hi; asm volatile("rdtsc" : "=a"(lo), "=d"(hi));', "host clock"),
        ('unsigned lo, hi; asm volatile("rd" "tscp" : "=a"(lo), "=d"(hi) :: "rcx");', "host clock"),
        ('unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));', "global timer"),
        ('asm volatile("call cudaStream" "CreateWithFlags@PLT");', "inline assembly"),
        ("int* seen; cudaHostAlloc((void**)&seen, 4, cudaHostAllocMapped);", "host memory"),
        ("auto start = &pthread_create;", "thread or process"),
        ("void* start = (void*)pthread_create;", "thread or process"),
        ("auto end = &exit;", "address of a process-control"),
        ("auto state = PyGILState_Ensure();", "Python"),
        ("cudaDeviceReset();", "device or context"),
    ],
)
def test_forbidden_calls_are_refused_with_a_reason(body, reason):
    result = screen_source(KERNEL.format(body=body))
    assert not result.ok and reason in result.reason and result.line == 2, result
    assert body.split("(")[0].strip()[:10] in result.text


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("#include <dlfcn.h>\n", "<dlfcn.h>"),
        ("#include <sys/socket.h>\n", "<sys/socket.h>"),
        ("#include <thread>\n", "<thread>"),
        ('#include "/root/.config/secrets.h"\n', "self-contained"),
        ('#include "hip/../../data/runs/x.h"\n', "self-contained"),
        ('#include "harness_secrets.h"\n', "self-contained"),
        ("__attribute__((constructor)) static void f() {}\n", "loaded"),
        ("__attribute__((destructor(101))) static void f() {}\n", "loaded"),
        ("struct S { S() { } };\nstatic S s;\n", "constructor at load time"),
        ("static int setup();\nstatic int x = setup();\n", "function call at load time"),
        ('std::string name = "x";\n', "constructor at load time"),
        (
            'extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) { return 0; }\n',
            "runtime",
        ),
        ("#define CAT(a, b) a##b\n", "token pasting"),
        ("#define cudaEventRecord(e, s) 0\n", "macro"),
        ('extern "C" int q(void**, unsigned) __asm__("cudaStreamCreateWithFlags");\n', "asm label"),
        ('extern "C" int q(void**, unsigned) asm("cudaStream" "CreateWithFlags");\n', "asm label"),
        ('extern "C" int q(void**, unsigned) asm("cudaStream" /* split */\n  "CreateWithFlags");\n', "asm label"),
        ('extern "C" void* m(const char*) asm("PyImport_" "ImportModule");\n', "Python"),
        ('extern "C" int t(void*, void*, void*(*)(void*), void*) asm("pthread_" "create");\n', "thread"),
    ],
)
def test_forbidden_file_scope_constructs_are_refused(source, reason):
    result = screen_source(source)
    assert not result.ok and reason in result.reason, result


ALLOWED = """
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
// A comment may say cudaStreamCreate, fopen(...) or getenv: comments are not code.
namespace {
constexpr int TILE = 64;
constexpr int blocks_for(int n) { return (n + TILE - 1) / TILE; }
__device__ int counter = 0;
__constant__ float table[4] = {1, 2, 3, 4};
struct Accumulator {
    float sum;
    __device__ Accumulator() : sum(0.0f) {}
    __device__ void write(float* out) const { *out = sum; }
};
}  // namespace

__global__ void kernel(float* c, int n) {
    __shared__ float tile[TILE];
    Accumulator acc;
    tile[threadIdx.x] = 0.0f;
    __syncthreads();
    if (threadIdx.x == 0 && c[0] != c[0]) printf("fopen(%d) getenv cudaEventRecord\\n", n);
    acc.write(c);
}

extern "C" int f(float* c, int n, void* stream) {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);
    cudaMemsetAsync(c, 0, sizeof(float) * n, s);
    kernel<<<blocks_for(n), TILE, 0, s>>>(c, n);
    return (int)cudaGetLastError();
}
"""


def test_what_honest_kernels_do_passes():
    result = screen_source(ALLOWED)
    assert result.ok, result.message


def test_adjacent_literals_in_device_messages_pass():
    printing = ALLOWED.replace('printf("fopen(%d) getenv cudaEventRecord\\n", n)', 'printf("cuda" "Malloc: %d\\n", n)')
    assert printing != ALLOWED and screen_source(printing).ok


def test_the_quoted_hip_runtime_include_that_hipify_writes_passes():
    hipified = '#include "hip/hip_runtime.h"\n' + ALLOWED.replace("#include <cuda_runtime.h>\n", "")
    assert screen_source(hipified).ok


def test_a_rejected_source_is_never_compiled(tmp_path):
    problem = load_problem("fp8_gemm")
    source = next(p for p in ADVERSARIAL if p.name == "side_stream.cu").read_text()
    verdict = evaluate_source(problem, source, EvaluationOptions(target="cuda", cache_dir=tmp_path / "cache"))
    assert verdict.status == Status.REJECTED and "stream" in verdict.message
    assert not (tmp_path / "cache").exists()
