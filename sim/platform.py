#!/usr/bin/env python3
"""platform.py — write a simulated cluster for StarPU + SimGrid (docs/SIMULATION.md).

    sim/platform.py --out DIR --nodes N --cores C [--gpus G --gpu KIND] [--pcie GBPS | --pcie-gen 3|4|5]
                    [--nvlink none|1|2|3|4]
                    [--network NET] [--name NAME] [--maxnodes M]

writes, for N identical nodes of C CPU cores and G GPUs of KIND:
  DIR/cluster.xml            the SimGrid cluster: N hosts joined by NET (a star of links through
                             one switch: each node's own link at NET's bandwidth and latency)
  DIR/hostfile               the N host names, one per MPI rank
  DIR/sampling/bus/NAME.*    each node's StarPU machine description (what StarPU would measure
                             on a real node): .config, .platform.v4.xml (cores, GPUs with their
                             memory, PCIe links), .bandwidth/.latency (MB/s, us), .affinity
  DIR/platform.txt           the same in words, with every number's source
  DIR/gpu.spec               the GPU's roofline numbers (name:peak_gflops:mem_gbs:eff_compute:
                             eff_memory:launch_us), read by the simulation build (ANP_SIM_GPU)
  DIR/models_cuda            where they came from: fitted-public (FITTED) or estimated (assumed;
                             --gpu-models estimated: always)
  DIR/cpu.spec               with --cpu KIND: the simulated cores (name:peak_gflops:core_gbs:
                             socket_gbs:cores_per_socket:llc_mb), read by the simulation build
                             (ANP_SIM_CPU); empty: the cores are this machine's (its calibration)

--gpu k80 | p100 | v100 | a100 | h100 | h200 | none, --gpu-precision fp32 | tf32 | bf16 | fp16 [fp32]; --network fdr | edr | 50gbe | 10gbe | 1gbe | infinite | netns (see GPUS / NETWORKS below; netns: the
namespace hosts of tests/net/cluster.sh, --rate RATE as `cluster.sh rate RATE`).
  DIR/smpi.cfg               SMPI options for starpu_smpirun (netns: SMPI's size factors off)
  DIR/cpu.share              netns with --netns-cores C: "C O R Q", the machine's cores the hosts
                             share, the other threads' CPU per unit of a worker's (NETNS_THREAD_CPU),
                             the ranks per core and the scheduler's time slice in us (NETNS_SLICE_US),
                             for scripts/lib.sh anp_netbench_simulate's processor sharing
"""
import argparse
import os
import sys

# The dense peaks (GFLOP/s) of Hopper's SMs and tensor cores, which the H100 SXM5 and the H200 SXM share (the
# same GH100 die and clocks; the H200 differs in its memory): one source for both entries of GPUS.
HOPPER_PEAK = dict(fp32=67000.0, tf32=494500.0, bf16=989500.0, fp16=989500.0)

# GPU kinds: the peak rates, memory and links of the vendors' data sheets (SXM boards, where the
# published training figures ran; the source of each number is in its comment and in
# docs/SIMULATION.md "GPU data sheets"). peak: dense rates in GFLOP/s per math precision (no
# sparsity; None where the GPU has no such units): fp32 (CUDA cores), tf32 (tensor cores, A100 and
# later), bf16 and fp16 (tensor cores; P100's fp16 is its packed half2 rate). The simulated math
# uses one of them (--gpu-precision, default fp32). pcie_gbs: the host link the model uses, per
# direction: 0.78 of the data sheet's per-direction rate (the pinned-copy fraction our H200 entry
# has used since it was written), except the K80's 10 GB/s of before (its two dies share one x16
# link behind a PLX switch). nvlink_gbs: the data sheet's total (both directions, all links);
# peer_gbs: one GPU pair's rate per direction in the model. Efficiencies and launch cost: the
# roofline's, assumed (docs/SIMULATION.md) until fitted to published throughput.
GPUS = {
    # Tesla K80 (NVIDIA, "Tesla K80 GPU Accelerator" data sheet / board specification, 2014/2015):
    # 8.73 TFLOP/s FP32 with GPU Boost per board of two GK210 dies (2496 cores x 2 FLOP x 875 MHz
    # = 4.37 per die), 480 GB/s GDDR5 per board (240 per die), 24 GB (12 per die), PCIe gen3 x16,
    # no NVLink, no FP16/tensor rate. The seed studies' GPU: one die is one CUDA device.
    "k80": dict(model="Tesla K80 (one GK210 die)", peak=dict(fp32=4370.0, tf32=None, bf16=None, fp16=None),
                mem_gbs=240.0, memsize=12 * 2**30, pcie_gen=3, pcie_gbs=10.0, nvlink_gbs=0.0, peer_gbs=10.0,
                eff_compute=0.55, eff_memory=0.70, launch_us=10.0),
    # Tesla P100 for NVLink-optimized servers, SXM2 (NVIDIA, "NVIDIA Tesla P100 GPU Accelerator"
    # data sheet, 2016): 10.6 TFLOP/s FP32, 21.2 FP16 (half2, no tensor cores), 16 GB CoWoS HBM2 at
    # 732 GB/s, PCIe gen3 x16 (32 GB/s both directions), NVLink 160 GB/s (4 links x 20 GB/s per
    # direction). DGX-1 (Goyal et al. 2017's servers): hybrid cube-mesh, one link per GPU pair.
    "p100": dict(model="Tesla P100 (SXM2 16 GB, {PREC})", peak=dict(fp32=10600.0, tf32=None, bf16=None, fp16=21200.0),
                 mem_gbs=732.0, memsize=16 * 2**30, pcie_gen=3, pcie_gbs=12.5, nvlink_gbs=160.0, peer_gbs=20.0,
                 eff_compute=0.50, eff_memory=0.70, launch_us=5.0),
    # Tesla V100 SXM2 (NVIDIA, "NVIDIA Tesla V100 GPU Accelerator" data sheet, 2018): 15.7 TFLOP/s
    # FP32, 125 TFLOP/s tensor (FP16 inputs; no BF16), 16 or 32 GB HBM2 at 900 GB/s, PCIe gen3 x16
    # (32 GB/s), NVLink 300 GB/s (6 links x 25 GB/s per direction; DGX-1 hybrid cube-mesh: one or
    # two links per pair, one modelled).
    "v100": dict(model="Tesla V100 (SXM2 16 GB, {PREC})", peak=dict(fp32=15700.0, tf32=None, bf16=None, fp16=125000.0),
                 mem_gbs=900.0, memsize=16 * 2**30, pcie_gen=3, pcie_gbs=12.5, nvlink_gbs=300.0, peer_gbs=25.0,
                 eff_compute=0.50, eff_memory=0.70, launch_us=5.0),
    # A100 SXM4 80 GB (NVIDIA, "NVIDIA A100 Tensor Core GPU" data sheet, 2021): 19.5 TFLOP/s FP32,
    # TF32 tensor 156 (312 with sparsity), BF16/FP16 tensor 312 (624 sparse), 80 GB HBM2e at
    # 2,039 GB/s (the 40 GB board: 1,555 GB/s), PCIe gen4 (64 GB/s), NVLink 600 GB/s (NVSwitch in
    # DGX A100: every pair at 300 GB/s per direction).
    "a100": dict(model="NVIDIA A100 (SXM4 80 GB, {PREC})",
                 peak=dict(fp32=19500.0, tf32=156000.0, bf16=312000.0, fp16=312000.0),
                 mem_gbs=2039.0, memsize=80 * 10**9, pcie_gen=4, pcie_gbs=25.0, nvlink_gbs=600.0, peer_gbs=300.0,
                 eff_compute=0.50, eff_memory=0.70, launch_us=5.0),
    # H100 SXM5 (NVIDIA, "NVIDIA H100 Tensor Core GPU" data sheet, 2023): 67 TFLOP/s FP32, TF32
    # tensor 989 and BF16/FP16 1,979 with sparsity (494.5 / 989.5 dense: HOPPER_PEAK), 80 GB HBM3 at
    # 3.35 TB/s, PCIe gen5 (128 GB/s), NVLink 900 GB/s (NVSwitch: 450 per direction per pair).
    "h100": dict(model="NVIDIA H100 (SXM5 80 GB, {PREC})", peak=dict(HOPPER_PEAK),
                 mem_gbs=3350.0, memsize=80 * 10**9, pcie_gen=5, pcie_gbs=50.0, nvlink_gbs=900.0, peer_gbs=450.0,
                 eff_compute=0.50, eff_memory=0.70, launch_us=5.0),
    # H200 SXM (NVIDIA, "NVIDIA H200 Tensor Core GPU" data sheet, 2024): the H100's math (67 TFLOP/s
    # FP32, TF32 989 / BF16 1,979 with sparsity, half dense: HOPPER_PEAK), 141 GB HBM3e at 4.8 TB/s,
    # PCIe gen5 (128 GB/s), NVLink 900 GB/s.
    "h200": dict(model="NVIDIA H200 (SXM, {PREC})", peak=dict(HOPPER_PEAK),
                 mem_gbs=4800.0, memsize=141 * 10**9, pcie_gen=5, pcie_gbs=50.0, nvlink_gbs=900.0, peer_gbs=450.0,
                 eff_compute=0.50, eff_memory=0.70, launch_us=5.0),
}
GPU_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")

# The roofline's efficiencies fitted to published single-GPU ResNet-50 training throughput
# (sim/fit_gpu.py; docs/studies/2026-12-07-gpu-models.md: figures, fit, hold-out errors), per
# (GPU, precision): used by default (models_cuda=fitted-public); --gpu-models estimated keeps the
# assumed ones of GPUS (the figures of before the fit), and --roofline overrides both (estimated).
# eff_compute fitted on one figure per GPU (the study's `fit` rows), eff_memory and launch_us kept
# as assumed (one figure cannot tell them apart); the H200 has no figure of its own in the fit: it
# takes the H100's (the same SMs and tensor cores), and its one published figure is held out.
FITTED = {
    ("k80", "fp32"): dict(eff_compute=0.336, eff_memory=0.70, launch_us=10.0),   # TF 2017, 51.9 img/s, b64
    ("p100", "fp32"): dict(eff_compute=0.636, eff_memory=0.70, launch_us=5.0),   # TF 2017, 219 img/s, b64
    ("v100", "fp32"): dict(eff_compute=0.785, eff_memory=0.70, launch_us=5.0),   # DLE PyTorch, 367 img/s, b112
    ("a100", "tf32"): dict(eff_compute=0.212, eff_memory=0.70, launch_us=5.0),   # DLE PyTorch, 938 img/s, b256
    ("h100", "tf32"): dict(eff_compute=0.151, eff_memory=0.70, launch_us=5.0),   # Lambda v2, 1894 img/s, b640
}
FITTED[("h200", "tf32")] = dict(FITTED[("h100", "tf32")])  # the H100's (the H200's figure, 2259 img/s, held out)

# CPU kinds (--cpu): the simulated node's cores, for the CPU node model of codelets/dnn_sim_model.h
# (each task's calibrated time split into compute, scaled by the ratio of the cores' peaks, and
# memory, its buffers at the bandwidth it gets on its socket). Rates in STREAM's count (each array
# once), as the model counts a task's buffers.
CPUS = {
    # Intel Xeon E5-2667 v2 (Ivy Bridge-EP), the Caffe seed's node: 2 sockets x 8 cores, 3.3 GHz
    # base (4.0 turbo), 25 MB L3, 4 x DDR3-1866 per socket, 59.7 GB/s peak per socket (Intel ARK,
    # "Intel Xeon Processor E5-2667 v2 (25M Cache, 3.30 GHz)"). AVX without FMA: one 8-wide add +
    # one 8-wide multiply per cycle = 16 FP32 FLOP/cycle x 3.3 GHz = 52.8 GFLOP/s per core. Stream
    # rates: one core 8.7 GB/s and 2 x 12 cores 75 GB/s STREAM triad on E5-2695 v2 with DDR3-1600
    # (Puget Systems, "Memory Performance for Intel Xeon Haswell-EP DDR4", 2014): 73% of 2 x
    # 51.2 GB/s; at 73% of DDR3-1866's 59.7, 43.6 GB/s per socket; one core is latency-bound, so
    # its 8.7 GB/s is kept (our estimate, not a measurement of this SKU).
    "e5-2667v2": dict(model="Intel Xeon E5-2667 v2 (Ivy Bridge-EP, 3.3 GHz, AVX)", peak_gflops=52.8,
                      core_gbs=8.7, socket_gbs=43.6, cores_per_socket=8, llc_mb=25),
}

# Networks: the bandwidth of each node's link to the switch and its latency (docs/SIMULATION.md
# "Networks", with every source). gbps: the link's data rate after its line code, what the standard
# gives (IEEE 802.3's MAC rate for Ethernet; the IBTA specification's 4x rate after 64b/66b for
# InfiniBand FDR and EDR, after PAM4 + RS-FEC for HDR and NDR): protocol headers are left to SMPI,
# whose default bandwidth factor (0.94 from 64 KiB up, SimGrid's calibration) applies to every
# network but netns. lat_us: the one-way small-message latency of one link: the NIC vendor's data
# sheet figure for RDMA (InfiniBand and RoCE, kernel bypass), an estimate of the kernel's TCP stack
# for TCP (10 us for 25 GbE and faster, as h-clusters' 50gbe; 15 and 30 us as before for 10 and 1 GbE).
# A message crosses two links (node -> switch -> node) and SMPI multiplies their latency by its
# default factor (2.0 for small messages, up to 11.6 from 64 KiB up), so a simulated ping is about
# 4x lat_us: the figures below are what each generation's hardware promises, the SMPI factors what
# MPI over it measured on SimGrid's reference cluster.
#   fdr: IBTA FDR 4x, 4 x 14.0625 Gb/s x 64/66 = 54.5 Gb/s; 0.7 us, the value of before (Mellanox
#        quotes under 1 us MPI latency for its FDR ConnectX-3 adapters).
#   edr: IBTA EDR 4x, 4 x 25.78125 Gb/s x 64/66 = 100 Gb/s; 0.6 us (ConnectX-4/5: sub-600 ns).
#   hdr: IBTA HDR 4x, 4 x 53.125 Gb/s PAM4 = 200 Gb/s of data; 0.6 us (NVIDIA, ConnectX-6 VPI user
#        manual, introduction: "sub-600ns latency").
#   ndr: IBTA NDR 4x, 4 x 106.25 Gb/s PAM4 = 400 Gb/s of data; 0.6 us (ConnectX-7: no lower figure
#        than ConnectX-6's is published for it; ours, an estimate).
#   Ethernet NNgbe: IEEE 802.3 NN Gb/s (802.3ab/ae/by/ba/bs), TCP over the kernel's stack;
#   NNgbe-roce: the same link with RoCE v2 (RDMA, kernel bypass): 0.8 us (NVIDIA/Mellanox,
#        "ConnectX-6 EN 200GbE adapter card" product brief: "sub 0.8usec latency"; the 25 GbE
#        ConnectX-4 Lx of 2017 is quoted alike). TCP against RoCE: ~10 us against 0.8 us.
NETWORKS = {
    "fdr": dict(desc="InfiniBand FDR 4x (56 Gb/s signalling, 54.5 Gb/s data; the seeds' Minotauro)",
                gbps=54.5, lat_us=0.7),
    "edr": dict(desc="InfiniBand EDR 4x (100 Gb/s)", gbps=100.0, lat_us=0.6),
    "10gbe": dict(desc="10 Gigabit Ethernet (TCP)", gbps=10.0, lat_us=15.0),
    # Goyal et al. 2017 (arXiv:1706.02677, section 5.1): Big Basin servers with one Mellanox ConnectX-4
    # 50 Gbit Ethernet NIC each, Wedge100 switches, Gloo's collectives over TCP. 47.8 Gb/s: the TCP
    # payload of full 1514-byte frames (1448 bytes) at the 50 Gb/s line rate; 10 us one way: a
    # kernel TCP stack's message latency (ours: 10gbe 15 us, the netns hosts 50 us), an estimate.
    "50gbe": dict(desc="50 Gigabit Ethernet, TCP (Goyal et al. 2017's Big Basin servers)", gbps=47.8, lat_us=10.0),
    "1gbe": dict(desc="1 Gigabit Ethernet (TCP)", gbps=1.0, lat_us=30.0),
    "infinite": dict(desc="an infinitely fast network (sanity checks)", gbps=8e6, lat_us=0.0),
    # InfiniBand HDR and NDR, Ethernet 25/40/100 GbE over TCP and 10-400 GbE over RoCE (the source
    # of each number: the comment above NETWORKS).
    "hdr": dict(desc="InfiniBand HDR 4x (200 Gb/s)", gbps=200.0, lat_us=0.6),
    "ndr": dict(desc="InfiniBand NDR 4x (400 Gb/s)", gbps=400.0, lat_us=0.6),
    "25gbe": dict(desc="25 Gigabit Ethernet (TCP)", gbps=25.0, lat_us=10.0),
    "40gbe": dict(desc="40 Gigabit Ethernet (TCP)", gbps=40.0, lat_us=10.0),
    "100gbe": dict(desc="100 Gigabit Ethernet (TCP)", gbps=100.0, lat_us=10.0),
    "10gbe-roce": dict(desc="10 Gigabit Ethernet (RoCE v2)", gbps=10.0, lat_us=0.8),
    "25gbe-roce": dict(desc="25 Gigabit Ethernet (RoCE v2; the Horovod paper's network)", gbps=25.0, lat_us=0.8),
    "40gbe-roce": dict(desc="40 Gigabit Ethernet (RoCE v2)", gbps=40.0, lat_us=0.8),
    "100gbe-roce": dict(desc="100 Gigabit Ethernet (RoCE v2)", gbps=100.0, lat_us=0.8),
    "200gbe-roce": dict(desc="200 Gigabit Ethernet (RoCE v2)", gbps=200.0, lat_us=0.8),
    "400gbe-roce": dict(desc="400 Gigabit Ethernet (RoCE v2)", gbps=400.0, lat_us=0.8),
    # The network-namespace hosts of tests/net/cluster.sh (--rate: the tbf rate of every host link,
    # both directions, or off): docs/NETWORK.md "The all-reduce microbenchmark". Written as a star
    # of full-duplex links (tbf shapes each direction of a veth separately; the MPI transport's
    # pairs: NETNS_DUPLEX) through the bridge, with SMPI's message-size factors off (smpi.cfg): the links say it all.
    "netns": dict(desc="network-namespace hosts on a bridge (tests/net/cluster.sh)", gbps=None, lat_us=None),
}

# The namespace hosts' links, measured on this machine (docs/NETWORK.md, "The all-reduce
# microbenchmark", calibration): TCP's goodput through tbf is NETNS_TCP_EFF of the configured rate
# (1448-byte segments in 1514-byte frames, ACKs; a TCP stream measured 0.938 at 1gbit and 0.944
# at 100mbit); an unshaped veth pair carries NETNS_VETH_GBPS (the kernel's copies on a shared
# core); NETNS_LAT_US: one-way latency of a message, StarPU-MPI + Open MPI's TCP BTL + veth and
# bridge: 50 us, the best of 25 / 50 / 100 / 150 over the microbenchmark's 114 cells since the
# workers and the progress thread sleep when idle (it was 2.2 ms while idle workers spun: then it
# was a wait for a core, not a latency). Override with --netns-eff / --netns-veth-gbps / --netns-lat-us.
NETNS_TCP_EFF = 0.94
NETNS_VETH_GBPS = 4.0
NETNS_LAT_US = 50.0
# tests/net/cluster.sh's tbf bucket (its tbf_words): a message that finds the bucket full sends its
# first burst x eff payload bytes at the unshaped veth's speed. Up to 100 Mbit/s the bucket is 8 KiB
# and modelled as such. Above, it is 256 KiB and partly refilled when a message comes: each
# direction of a link idles between the messages of a chain (the tree's two messages over 2 hosts
# use opposite directions), so a static link sees the bucket's mean refill, NETNS_FAST_BUCKET
# bytes. Until 2026-12-07 it was modelled as none (the microbenchmark's 16-256 KiB cells at 1 Gbit/s
# 1.4-2.5x too slow) or full (0.47-0.96); 64 KiB, the best of 64 / 128 KiB on the fitting half of
# the microbenchmark's cells (docs/studies/2026-12-07-netns-validation.md). --netns-burst B sets one bucket for every rate,
# --netns-fast-bucket B the one above 100 Mbit/s.
NETNS_FAST_BUCKET = 64 * 1024


def netns_burst(rate_gbps, fast_bucket=NETNS_FAST_BUCKET):
    return 8 * 1024 if rate_gbps <= 0.1 else fast_bucket


# Two ranks' transfers to each other do not overlap in time over Open MPI's TCP transport here (the
# 2-host ring: each link's tx counter rises only while the other's is still; two plain TCP
# streams over the same links, one each way, get 95 and 91 Mbit/s at once), while a rank's send to
# one peer and receive from another do (the 4-host ring: 16 MiB in 0.48 s at 1 Gbit/s, 1.39x
# faster than a model where they share the host's link). Modelled by a SHARED link of the same
# rate per pair of hosts on every route (NETNS_DUPLEX "pair"), besides the hosts' full-duplex links.
NETNS_DUPLEX = "pair"

# Ranks sharing cores (--netns-cores C, the cores of the machine that runs the N hosts; docs/NETWORK.md
# "Ranks sharing cores"). A cluster gives every rank its cores; namespace hosts on a 2-core machine
# do not, and two things follow, both measured (bench/thread_cpu.sh, docs/studies/
# 2026-12-06-sim-validation-netns-hosts.md):
# - processor sharing: each rank's worker, StarPU-MPI's progress thread and the submitting thread
#   want a core; when the N ranks want more than C, every task takes demand / C longer. The
#   demand is the workers' busy time (from the simulation) x (1 + NETNS_THREAD_CPU), the
#   progress and submitting threads' CPU per unit of the worker's: 0.41 measured (lenet5 over
#   2 hosts on 2 cores: worker 68 %, progress thread 21 %, submitting thread 7 % of a core).
#   cpu.share hands C and that ratio to scripts/lib.sh anp_netbench_simulate, which simulates,
#   derives the stretch and simulates again with ANP_SIM_CPU_SHARE (codelets/dnn_sim_model.c);
# - a woken thread waits for a core: with more ranks than cores, every message waits
#   NETNS_CORE_WAIT_US per extra rank per core for its receiver's progress thread, added to the
#   links' latency. 100 us: the best of 100 / 250 (and 750, from a 4 KiB all-reduce between 2
#   hosts sharing one core: 1.8-2.1 ms against 0.25-1.05 ms with a core each, far too slow for
#   3-4 hosts on 2 cores) on the fitting half of the microbenchmark's cells, checked on the other
#   half (docs/studies/2026-12-07-netns-validation.md).
NETNS_THREAD_CPU = 0.41
# The time slice of Linux's scheduler on this 2-core machine (EEVDF, kernel 6.18: a base slice of
# 0.75 ms x (1 + log2 2)): a task shorter than it mostly runs whole once it has a core, a longer one
# is preempted inside it, so its calibrated time already holds the sharing (codelets/dnn_sim_model.c).
NETNS_SLICE_US = 1500.0
NETNS_CORE_WAIT_US = 100.0

# Inside a node: the host link (--pcie-gen) and the GPU-GPU link (--nvlink), overriding the GPU
# kind's own (GPUS: pcie_gbs, peer_gbs). Per direction, as the model uses them.
# PCIe x16 (PCI-SIG, PCI Express Base Specification 3.0/4.0/5.0): 8 / 16 / 32 GT/s per lane with
# 128b/130b encoding, so 15.75 / 31.5 / 63.0 GB/s of data per direction (the data sheets' rounded
# 16 / 32 / 64); the model's rate is 0.78 of the rounded figure, the pinned-copy fraction GPUS uses
# (12.5 / 25 / 50 GB/s: 0.79 of the coded rate; TLP headers and DMA set-up take the rest).
PCIE_GENS = {3: 12.5, 4: 25.0, 5: 50.0}
# NVLink (NVIDIA's P100, V100, A100 and H100 data sheets and architecture white papers): per link
# and direction 20 GB/s (NVLink 1, 4 links per P100), 25 GB/s (NVLink 2, 6 per V100; NVLink 3, 12
# per A100; NVLink 4, 18 per H100). The pair rate the model gives two GPUs: one link for NVLink 1
# and 2 (DGX-1's hybrid cube-mesh joins most pairs by one link), all of a GPU's links for 3 and 4
# (NVSwitch: 300 and 450 GB/s). "none": no NVLink, GPU to GPU through PCIe at the host link's rate.
NVLINKS = {"1": 20.0, "2": 25.0, "3": 300.0, "4": 450.0}


def tbf_bw_factors(rate_gbps, eff, veth_gbps, burst):
    """SMPI's per-message-size bandwidth factors (relative to the link's rate x eff) of a tbf link
    whose bucket is full when a message starts (the link idled since the last one): a message of S
    bytes takes max((S - b) / (rate x eff), S / veth) with b = burst x eff (the veth and the tbf
    are pipelined), i.e. the factor min(S / (S - b), veth / (rate x eff)). Piecewise constant:
    thresholds every quarter octave from b / 64 to b x 2^10, each range's factor taken at its
    geometric middle (within 9% of the exact curve near b, 1% from 2 b on)."""
    r, b = rate_gbps * eff, burst * eff
    def f(S):
        return S / max(S - b, S * r / veth_gbps)
    pts = []
    k = -24
    while k <= 40:
        lo = b * 2 ** (k / 4)
        pts.append((int(lo), f(lo * 2 ** (1 / 8))))
        k += 1
    pts = [(0, f(1.0))] + pts
    return ";".join(f"{t}:{v:.5f}" for t, v in sorted(pts, reverse=True))


def parse_rate(r):
    """tc's rate words (off, 100mbit, 1gbit, 2.5gbit, 500kbit) -> Gbit/s, or None for off."""
    r = r.strip().lower()
    if r == "off":
        return None
    for suffix, scale in (("gbit", 1.0), ("mbit", 1e-3), ("kbit", 1e-6)):
        if r.endswith(suffix):
            try:
                v = float(r[: -len(suffix)])
            except ValueError:
                break
            if v > 0:
                return v * scale
    die(f"--rate '{r}': expected off or a tc rate such as 100mbit or 1gbit")


def die(msg):
    print(f"platform.py: {msg}", file=sys.stderr)
    sys.exit(2)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def netns_cluster(n, C, G, gpu, net, duplex):
    """The namespace hosts: node i's link (its veth, shaped each way) to the bridge, a route
    between two nodes = the sender's link up + the receiver's link down."""
    bw = net["gbps"] * 1e9 / 8
    lines = ["<?xml version='1.0'?>",
             '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
             '<platform version="4.1">',
             f'<!-- {n} nodes x ({C} cores, {G} x {gpu if G else "no GPU"}); network: {net["desc"]} -->',
             '<zone id="AS0" routing="Full">']
    lines += [f'  <host id="node{i}" speed="1Gf"/>' for i in range(n)]
    policy = "SHARED" if duplex == "host" else "SPLITDUPLEX"
    up, down = ("", "") if duplex == "host" else (' direction="UP"', ' direction="DOWN"')
    lines += [f'  <link id="veth{i}" bandwidth="{bw:.1f}Bps" latency="{net["lat_us"]}us" sharing_policy="{policy}"/>'
              for i in range(n)]
    if duplex == "pair":
        lines += [f'  <link id="pair{i}-{j}" bandwidth="{bw:.1f}Bps" latency="0us" sharing_policy="SHARED"/>'
                  for i in range(n) for j in range(i + 1, n)]
    for i in range(n):
        for j in range(n):
            if i != j:
                pair = f'<link_ctn id="pair{min(i, j)}-{max(i, j)}"/>' if duplex == "pair" else ""
                lines.append(f'  <route src="node{i}" dst="node{j}" symmetrical="NO"><link_ctn id="veth{i}"{up}/>'
                             f'{pair}<link_ctn id="veth{j}"{down}/></route>')
    lines += ["</zone>", "</platform>", ""]
    return "\n".join(lines)


def main():
    if sys.argv[1:] == ["--list-networks"]:  # simulate.sh's check of --network
        print("\n".join(NETWORKS))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--gpus", type=int, default=0)
    ap.add_argument("--gpu", default="none", choices=sorted(GPUS) + ["none"])
    ap.add_argument("--gpu-precision", default="fp32", choices=GPU_PRECISIONS,
                    help="the simulated GPU math: fp32 (CUDA cores, as DNN_CUDA_MATH=fp32), tf32 (tensor cores, "
                         "A100 and later), bf16 / fp16 (tensor-core peak) [fp32]")
    ap.add_argument("--gpu-models", default="fitted", choices=["fitted", "estimated"],
                    help="the roofline's efficiencies: fitted to published throughput where FITTED has the GPU "
                         "and precision (else the assumed ones), or the assumed ones [fitted]")
    ap.add_argument("--roofline", default=None, metavar="EC:EM:LAUNCH",
                    help="override eff_compute:eff_memory:launch_us (sim/fit_gpu.py's knob; labelled estimated)")
    ap.add_argument("--memsize-gb", type=float, default=None,
                    help="override the GPU's memory, GB (sim/fit_gpu.py: to time a published batch whose "
                         "activations, as this tool keeps them, exceed the card) [the kind's]")
    ap.add_argument("--pcie", type=float, default=None, help="host<->GPU GB/s [the GPU kind's]")
    ap.add_argument("--pcie-gen", type=int, default=None, choices=sorted(PCIE_GENS),
                    help="host<->GPU link: PCIe generation, x16 (PCIE_GENS) [the GPU kind's]; --pcie overrides")
    ap.add_argument("--nvlink", default=None, choices=["none"] + sorted(NVLINKS),
                    help="GPU<->GPU link: NVLink generation (NVLINKS), or none (through PCIe) [the GPU kind's]")
    ap.add_argument("--cpu", default="here", choices=sorted(CPUS) + ["here"],
                    help="the cores' kind [here: this machine's, as calibrated]")
    ap.add_argument("--network", default="fdr", choices=sorted(NETWORKS))
    ap.add_argument("--name", default=None, help="the nodes' StarPU host name [derived]")
    ap.add_argument("--maxnodes", type=int, default=32, help="StarPU's STARPU_MAXNODES (starpu_config.h)")
    ap.add_argument("--rate", default=None, help="--network netns: the tbf rate of the host links (off, 100mbit, 1gbit)")
    ap.add_argument("--netns-eff", type=float, default=NETNS_TCP_EFF, help="TCP goodput / tbf rate")
    ap.add_argument("--netns-veth-gbps", type=float, default=NETNS_VETH_GBPS, help="unshaped link, Gbit/s")
    ap.add_argument("--netns-lat-us", type=float, default=NETNS_LAT_US, help="one-way latency per message, us")
    ap.add_argument("--netns-burst", type=int, default=None,
                    help="tbf bucket, bytes (0: model none; default 8 KiB up to 100 Mbit/s, none above)")
    ap.add_argument("--netns-fast-bucket", type=int, default=NETNS_FAST_BUCKET,
                    help="above 100 Mbit/s: the bytes of the 256 KiB tbf bucket a message finds refilled")
    ap.add_argument("--netns-cores", type=int, default=None,
                    help="the machine's cores that the hosts share (default: a core per host, a cluster)")
    ap.add_argument("--netns-thread-cpu", type=float, default=NETNS_THREAD_CPU,
                    help="the progress and submitting threads' CPU per unit of a worker's (with --netns-cores)")
    ap.add_argument("--netns-core-wait-us", type=float, default=NETNS_CORE_WAIT_US,
                    help="a message's wait for a core per extra rank per core, us (with --netns-cores)")
    ap.add_argument("--netns-duplex", default=NETNS_DUPLEX, choices=["pair", "host", "full"],
                    help="the two directions between two hosts share one rate (pair), a host's sends "
                         "and receives share its link (host), or neither (full)")
    a = ap.parse_args()
    if a.nodes < 1 or a.nodes > 4096:
        die(f"--nodes {a.nodes}: expected 1..4096")
    if a.cores < 1 or a.cores > 64:
        die(f"--cores {a.cores}: expected 1..64 (the simulation StarPU is built with --enable-maxcpus=64)")
    if a.gpus < 0 or a.gpus > 8:
        die(f"--gpus {a.gpus}: expected 0..8 (--enable-maxcudadev=8)")
    if a.gpus and a.gpu == "none":
        die(f"--gpus needs --gpu KIND ({', '.join(GPUS)})")
    gpu = dict(GPUS[a.gpu]) if a.gpus else None
    if gpu:
        peak = gpu["peak"][a.gpu_precision]
        if peak is None:
            has = [p for p in GPU_PRECISIONS if gpu["peak"][p]]
            die(f"--gpu-precision {a.gpu_precision}: {a.gpu} has no such units (it has: {', '.join(has)})")
        gpu.update(peak_gflops=peak, model=gpu["model"].replace("{PREC}", a.gpu_precision.upper()))
        gpu["models"] = "estimated"
        fit = FITTED.get((a.gpu, a.gpu_precision))
        if a.gpu_models == "fitted" and fit:
            gpu.update({k: fit[k] for k in ("eff_compute", "eff_memory", "launch_us")}, models="fitted-public")
        if a.memsize_gb is not None:
            if not 0 < a.memsize_gb <= 1e6:
                die(f"--memsize-gb {a.memsize_gb}: expected GB in (0, 1e6]")
            gpu["memsize"] = a.memsize_gb * 1e9
        if a.roofline is not None:
            try:
                ec, em, lu = (float(x) for x in a.roofline.split(":"))
            except ValueError:
                ec = em = lu = -1.0
            # eff_compute is of the direct FLOP count (STARPU_FLOPS): cuDNN's Winograd convolutions do
            # 2.25x (F(2x2,3x3)) to 4x (F(4x4,3x3)) fewer multiplies, so a 3x3-conv net such as VGG-16
            # can run above 1 (TensorFlow's 154 images/s on a P100 is 1.35 of its FP32 peak, counted directly).
            if not (0 < ec <= 4 and 0 < em <= 1 and lu >= 0):
                die(f"--roofline '{a.roofline}': expected eff_compute:eff_memory:launch_us, eff_compute in (0,4] "
                    "(of the direct FLOP count), eff_memory in (0,1]")
            gpu.update(eff_compute=ec, eff_memory=em, launch_us=lu, models="estimated")
    if (a.pcie_gen or a.nvlink) and not gpu:
        die("--pcie-gen and --nvlink need --gpus G --gpu KIND")
    pcie = a.pcie if a.pcie else (PCIE_GENS[a.pcie_gen] if a.pcie_gen else (gpu["pcie_gbs"] if gpu else 0.0))
    if gpu and not pcie > 0:
        die(f"--pcie {a.pcie}: expected a bandwidth in GB/s > 0")
    if gpu and a.nvlink:
        gpu["peer_gbs"] = pcie if a.nvlink == "none" else NVLINKS[a.nvlink]
    net = dict(NETWORKS[a.network])
    if a.network == "netns":
        if a.rate is None:
            die("--network netns needs --rate (off, or the tbf rate: 100mbit, 1gbit, ...)")
        g = parse_rate(a.rate)
        eff_gbps = g * a.netns_eff if g else a.netns_veth_gbps
        if a.netns_cores is not None and not 1 <= a.netns_cores <= 1024:
            die(f"--netns-cores {a.netns_cores}: expected 1..1024")
        if a.netns_thread_cpu < 0 or a.netns_core_wait_us < 0:
            die("--netns-thread-cpu and --netns-core-wait-us: expected >= 0")
        rpc = a.nodes / a.netns_cores if a.netns_cores else 1.0
        # per link: a message crosses two (its sender's and its receiver's), the wait is once per message
        lat = a.netns_lat_us + a.netns_core_wait_us * max(0.0, rpc - 1.0) / 2
        net.update(gbps=eff_gbps, lat_us=lat,
                   desc=f"namespace hosts, tbf {a.rate}" + (f" x {a.netns_eff} TCP goodput" if g else
                        f" (unshaped veth, {a.netns_veth_gbps} Gb/s measured)") + f", {a.netns_lat_us} us per link" +
                        (f" + {lat - a.netns_lat_us:g} us waiting for a core ({a.nodes} hosts on {a.netns_cores} cores)"
                         if lat > a.netns_lat_us else ""))
    elif a.rate is not None:
        die("--rate applies to --network netns only")
    prec = "" if a.gpu_precision == "fp32" or not a.gpus else "-" + a.gpu_precision  # fp32: the names of before
    name = a.name or (f"sim-{a.cores}c" + (f"-{a.cpu}" if a.cpu != "here" else "") +
                      (f"-{a.gpus}x{a.gpu}{prec}" if a.gpus else ""))
    if not name.replace("-", "").replace("_", "").isalnum():
        die(f"--name '{name}': letters, digits, - and _ only")

    bus = os.path.join(a.out, "sampling", "bus")
    os.makedirs(bus, exist_ok=True)
    G, C = a.gpus, a.cores

    # .config: what StarPU found on the node
    write(os.path.join(bus, f"{name}.config"),
          "# Current configuration\n"
          f"{C} # Number of CPUs\n1 # Number of NUMA nodes\n{G} # Number of CUDA nodes\n"
          "0 # Number of OpenCL nodes\n0 # Number of FPGA nodes\n0 # Number of Disk nodes\n"
          "0 # Number of MPI_MS nodes\n0 # Number of TCPIP_MS nodes\n0 # Number of HIP nodes\n")
    # .bandwidth (MB/s) and .latency (us) between memory nodes: 0 = RAM, 1..G = CUDA0..
    M = a.maxnodes
    def matrix(val):
        rows = ["# " + "\t".join(f"to {j}" for j in range(M)) + "\t"]
        for i in range(M):
            rows.append("\t".join(val(i, j) for j in range(M)))
        return "\n".join(rows) + "\n"
    pcie_mbs, peer_mbs = pcie * 1e3, (gpu["peer_gbs"] * 1e3 if gpu else 0)
    def cell(host, peer):  # host: RAM<->GPU value, peer: GPU<->GPU value; nan past the last node
        return lambda i, j: ("nan" if i > G or j > G else "0.000000e+00" if i == j
                             else f"{(host if 0 in (i, j) else peer):.6e}")
    bw, lat = cell(pcie_mbs, peer_mbs), cell(10.0, 12.0)
    write(os.path.join(bus, f"{name}.bandwidth"), matrix(bw))
    write(os.path.join(bus, f"{name}.latency"), matrix(lat))
    # .affinity: for each GPU, the NUMA nodes by affinity (one NUMA node here)
    write(os.path.join(bus, f"{name}.affinity"),
          "# GPU\tNUMA0\t\n" + "".join(f"{g}\t0\t\n" for g in range(G)))
    # .platform.v4.xml: the node as SimGrid hosts and links (StarPU's own layout)
    hosts = ['   <host id="MAIN" speed="1f"/>']
    hosts += [f'   <host id="CPU{c}" speed="2000000000f"/>' for c in range(C)]
    for g in range(G):
        hosts.append(f'   <host id="CUDA{g}" speed="2000000000f">\n'
                     f'     <prop id="model" value="{gpu["model"]}"/>\n'
                     f'     <prop id="memsize" value="{int(gpu["memsize"])}"/>\n'
                     '     <prop id="memcpy_peer" value="1"/>\n   </host>')
    hosts.append('   <host id="RAM" speed="1f"/>')
    links = [f'   <link id="Host" bandwidth="{pcie * 1e9 if G else 1e12:.1f}Bps" latency="0.000000s"/>']
    routes = []
    for g in range(G):
        links.append(f'   <link id="RAM-CUDA{g}" bandwidth="{pcie * 1e9:.1f}Bps" latency="0.000010s"/>')
        links.append(f'   <link id="CUDA{g}-RAM" bandwidth="{pcie * 1e9:.1f}Bps" latency="0.000010s"/>')
        for src, dst in ((f"RAM", f"CUDA{g}"), (f"CUDA{g}", "RAM")):
            routes.append(f'   <route src="{src}" dst="{dst}" symmetrical="NO">\n'
                          f'     <link_ctn id="{src}-{dst}"/>\n     <link_ctn id="Host"/>\n   </route>')
    for g in range(G):
        for h in range(G):
            if g == h:
                continue
            links.append(f'   <link id="CUDA{g}-CUDA{h}" bandwidth="{gpu["peer_gbs"] * 1e9:.1f}Bps" '
                         'latency="0.000012s"/>')
            routes.append(f'   <route src="CUDA{g}" dst="CUDA{h}" symmetrical="NO">\n'
                          f'     <link_ctn id="CUDA{g}-CUDA{h}"/>\n   </route>')
    write(os.path.join(bus, f"{name}.platform.v4.xml"),
          "<?xml version='1.0'?>\n"
          "<!DOCTYPE platform SYSTEM 'https://simgrid.org/simgrid.dtd'>\n"
          ' <platform version="4">\n'
          ' <config id="General">\n'
          '   <prop id="network/TCP-gamma" value="-1"></prop>\n'
          '   <prop id="network/latency-factor" value="1"></prop>\n'
          '   <prop id="network/bandwidth-factor" value="1"></prop>\n'
          '   <prop id="network/crosstraffic" value="0"></prop>\n'
          '   <prop id="network/weight-S" value="0.0"></prop>\n'
          ' </config>\n'
          ' <AS  id="AS0"  routing="Full">\n' + "\n".join(hosts) + "\n\n" + "\n".join(links) + "\n\n"
          + "\n".join(routes) + "\n </AS>\n </platform>\n")

    # The cluster: N hosts, each with its own link to one switch (SimGrid's <cluster>).
    bw_bps = net["gbps"] * 1e9 / 8
    write(os.path.join(a.out, "cluster.xml"),
          "<?xml version='1.0'?>\n"
          "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
          '<platform version="4.1">\n'
          f'<!-- {a.nodes} nodes x ({C} cores, {G} x {a.gpu if G else "no GPU"}); network: {net["desc"]} -->\n'
          '<zone id="AS0" routing="Full">\n'
          f'  <cluster id="anp" prefix="node" suffix="" radical="0-{a.nodes - 1}" speed="1Gf"\n'
          f'           bw="{bw_bps:.1f}Bps" lat="{net["lat_us"]}us" bb_bw="{bw_bps * a.nodes:.1f}Bps" '
          f'bb_lat="0us"/>\n'
          '</zone>\n</platform>\n')
    if a.network == "netns":
        write(os.path.join(a.out, "cluster.xml"), netns_cluster(a.nodes, C, G, a.gpu, net, a.netns_duplex))
    # SMPI's options for this platform (simulate.sh passes them to starpu_smpirun): the netns
    # links are the measured goodput and latency, so SMPI's own per-size factors (a GbE cluster's
    # calibration, 0.34-0.94 of the bandwidth and 2-12x the latency) stay off; other networks
    # keep SMPI's defaults.
    cfg = "\n"
    if a.network == "netns":
        g = parse_rate(a.rate)
        burst = a.netns_burst if a.netns_burst is not None else (netns_burst(g, a.netns_fast_bucket) if g else 0)
        bwf = tbf_bw_factors(g, a.netns_eff, a.netns_veth_gbps, burst) if g and burst > 0 else "0:1"
        cfg = f"--cfg=smpi/bw-factor:{bwf} --cfg=smpi/lat-factor:0:1 --cfg=network/crosstraffic:0\n"
    write(os.path.join(a.out, "smpi.cfg"), cfg)
    if a.network == "netns" and a.netns_cores:
        write(os.path.join(a.out, "cpu.share"),
              f"{a.netns_cores} {a.netns_thread_cpu} {max(1.0, a.nodes / a.netns_cores):g} {NETNS_SLICE_US:g}\n")
    write(os.path.join(a.out, "hostfile"), "".join(f"node{i}\n" for i in range(a.nodes)))
    spec = (f"{a.gpu}{'' if a.gpu_precision == 'fp32' else '-' + a.gpu_precision}:{gpu['peak_gflops']}:{gpu['mem_gbs']}:{gpu['eff_compute']}:{gpu['eff_memory']}:"
            f"{gpu['launch_us']}" if gpu else "")
    write(os.path.join(a.out, "gpu.spec"), spec + "\n")
    write(os.path.join(a.out, "models_cuda"), (gpu["models"] if gpu else "-") + "\n")
    cpu = CPUS.get(a.cpu)
    cspec = (f"{a.cpu}:{cpu['peak_gflops']}:{cpu['core_gbs']}:{cpu['socket_gbs']}:{cpu['cores_per_socket']}:"
             f"{cpu['llc_mb']}" if cpu else "")
    write(os.path.join(a.out, "cpu.spec"), cspec + "\n")
    write(os.path.join(a.out, "name"), name + "\n")
    lines = [f"platform {name}: {a.nodes} node(s)",
             (f"  per node: {C} CPU cores (each timed by this machine's calibrated CPU models), " if not cpu else
              f"  per node: {C} CPU cores of {cpu['model']}: {cpu['peak_gflops']} GFLOP/s per core, "
              f"{cpu['core_gbs']} GB/s per core, {cpu['socket_gbs']} GB/s per socket of {cpu['cores_per_socket']} "
              f"(this machine's calibrated times, split and scaled), ") +
             f"{G} GPU(s)" + (f" {gpu['model']}" if G else ""),
             f"  network: {net['desc']}: {net['gbps']} Gb/s per node link, {net['lat_us']} us"]
    if G:
        link = {None: "", "none": " (no NVLink: through PCIe)"}.get(a.nvlink, f" (NVLink {a.nvlink})")
        lines += [f"  host<->GPU: {pcie} GB/s each way (PCIe{' gen' + str(a.pcie_gen) if a.pcie_gen else ''}), "
                  f"GPU<->GPU {gpu['peer_gbs']} GB/s{link}",
                  f"  GPU models: roofline ({gpu['models']}), peak {a.gpu_precision.upper()} {gpu['peak_gflops']:.0f} GFLOP/s x {gpu['eff_compute']}, "
                  f"{gpu['mem_gbs']:.0f} GB/s x {gpu['eff_memory']}, + {gpu['launch_us']} us per task; "
                  f"memory {gpu['memsize'] / 2**30:.1f} GiB"]
    write(os.path.join(a.out, "platform.txt"), "\n".join(lines) + "\n")
    print(name)


if __name__ == "__main__":
    main()
