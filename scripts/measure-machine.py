#!/usr/bin/env python3
# Measures the ceilings the cost model uses on the GPU machine (needs PyTorch): dense GEMM rates in bf16 and f32,
# device-to-device copy bandwidth, a small kernel's launch-to-completion time, and, with two GPUs, the bytes per
# second one rank sends in an NCCL all_reduce. Prints a machine YAML for models/machines/.
# Usage: python3 scripts/measure-machine.py > models/machines/h200-measured.yaml
import os, sys, time
import torch


def median_ms(fn, warmup=5, repeat=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def gemm_rate(dtype, n=8192):
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(n, n, device="cuda", dtype=dtype)  # never zeros (METHOD.md)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    ms = median_ms(lambda: torch.mm(a, b))
    return 2 * n ** 3 / (ms / 1e3)


def copy_bandwidth(numel=1 << 29):
    src = torch.randn(numel, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / (ms / 1e3)  # bytes read + bytes written


def launch_overhead():
    x = torch.randn(256, device="cuda")
    count = 1000
    def many():
        for _ in range(count):
            x.add_(1.0)
    return median_ms(many, warmup=2, repeat=5) / 1e3 / count


def allreduce(rank, world, numel, out):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29555")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    x = torch.randn(numel, device="cuda", dtype=torch.bfloat16)
    small = torch.randn(1, device="cuda")
    big = median_ms(lambda: dist.all_reduce(x))
    tiny = median_ms(lambda: dist.all_reduce(small), repeat=50)
    if rank == 0:
        sent = 2 * (world - 1) / world * x.numel() * 2  # ring: bytes one rank sends
        out.put((sent / ((big - tiny) / 1e3), tiny / 1e3))
    dist.destroy_process_group()


def main():
    name = torch.cuda.get_device_name(0)
    bf16, f32 = gemm_rate(torch.bfloat16), gemm_rate(torch.float32)
    bandwidth, launch = copy_bandwidth(), launch_overhead()
    link = None
    if torch.cuda.device_count() >= 2:
        import torch.multiprocessing as mp
        queue = mp.get_context("spawn").SimpleQueue()
        mp.spawn(allreduce, args=(2, 1 << 28, queue), nprocs=2)
        link = queue.get()
    print(f"# measured on {name} by scripts/measure-machine.py (torch {torch.__version__}),")
    print(f"# {time.strftime('%Y-%m-%d')}: GEMM 8192^3 (tf32 off), 2 GiB device copy (read + write),")
    print("# 1000 tiny kernels; NCCL all_reduce of 512 MiB bf16 over 2 GPUs when present.")
    print(f"name: {name.replace(' ', '-').lower()}-measured")
    print(f"peak_flops: {{bf16: {bf16:.3e}, f32: {f32:.3e}}}")
    print(f"memory_bandwidth: {bandwidth:.3e}")
    print(f"launch_overhead: {launch:.3e}")
    if link:
        beta, alpha = link
        print("links:")
        for axis in ("tp", "dp"):
            print(f"  {axis}: {{alpha: {alpha:.3e}, beta: {beta:.3e}}}")
    else:
        print("# one GPU: no link measured; the links are the default file's leads")
        print("links:")
        for axis in ("tp", "dp"):
            print(f"  {axis}: {{alpha: 1.0e-5, beta: 3.0e11}}")


if __name__ == "__main__":
    sys.exit(main())
