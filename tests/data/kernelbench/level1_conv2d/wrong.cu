// expect: wrong
// A true convolution (the kernel flipped) where nn.Conv2d computes a cross-correlation.
#include <cuda_runtime.h>

__global__ void conv2d_flipped(const float* x, const float* w, const float* bias, float* out, int n, int c, int oc,
                               int k, int h, int wd) {
    const int oh_n = h - k + 1, ow_n = wd - k + 1;
    const size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (idx >= (size_t)n * oc * oh_n * ow_n) return;
    const int ow = idx % ow_n, oh = (idx / ow_n) % oh_n, o = (idx / ((size_t)ow_n * oh_n)) % oc;
    const int b = idx / ((size_t)ow_n * oh_n * oc);
    float acc = bias[o];
    for (int ci = 0; ci < c; ++ci)
        for (int kh = 0; kh < k; ++kh)
            for (int kw = 0; kw < k; ++kw)
                acc += x[(((size_t)b * c + ci) * h + oh + kh) * wd + ow + kw] *
                       w[(((size_t)o * c + ci) * k + (k - 1 - kh)) * k + (k - 1 - kw)];
    out[idx] = acc;
}

extern "C" int level1_conv2d(const void* x, const void* conv2d_weight, const void* conv2d_bias, void* out,
                             int batch_size, int in_channels, int out_channels, int kernel_size, int width, int height,
                             void* stream) {
    const size_t total = (size_t)batch_size * out_channels * (height - kernel_size + 1) * (width - kernel_size + 1);
    conv2d_flipped<<<(unsigned)((total + 255) / 256), 256, 0, (cudaStream_t)stream>>>(
        (const float*)x, (const float*)conv2d_weight, (const float*)conv2d_bias, (float*)out, batch_size, in_channels,
        out_channels, kernel_size, height, width);
    return (int)cudaGetLastError();
}
