#!/bin/bash
# Pack a CUDA build's GPU checks for a GPU node that has the NVIDIA driver,
# CUDA and NCCL but neither MPI, UCX nor hwloc (nor a compiler that could
# build them): the real binaries out of libtool's .libs folders, every
# shared library they need that is not the C library's or NVIDIA's (MPICH's
# libmpich, UCX with its transport modules, hwloc with its PCI plugin,
# libnuma, libudev, libcudart), MPICH's Hydra launcher, and
# gpu_check.sh with run_gpu.sh and fake_nodes.sh. On the node:
#   tar xf gpu-bundle.tar.xz && gpu-bundle/gpu_check.sh --bundle gpu-bundle [OUTDIR]
# libnccl is not packed (about 200 MB): the node's own is used (/usr/local/cuda,
# a Python wheel's nvidia/nccl/lib, or LD_LIBRARY_PATH); gpu_check.sh finds it.
#
# Usage: tests/gpu/pack.sh BUILD_DIR OUTDIR   (BUILD_DIR: an MPICH build with
#        CUDA and NCCL, scripts/build.sh mpich: Hydra, MPICH's launcher, needs
#        no plugins, where Open MPI's needs its whole installation)
set -euo pipefail
B=$(cd "${1:?usage: pack.sh BUILD_DIR OUTDIR}" && pwd)
dest=${2:?usage: pack.sh BUILD_DIR OUTDIR}
top=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "pack.sh: $*" >&2; exit 1; }
grep -qE '^#define FR_HAVE_CUDA 1' "$B/config.h" 2>/dev/null || die "$B has no CUDA built in"
grep -qE '^#define FR_HAVE_NCCL 1' "$B/config.h" || die "$B has no NCCL built in"
grep -q 'mpicc.mpich' "$B/.configure-args" 2>/dev/null || die "$B is not an MPICH build (scripts/build.sh mpich)"
make -C "$B" >/dev/null && make -C "$B/tests" gpu/test_device gpu/nccl_plugin_load mpi/test_zcopy mpi/test_cma >/dev/null
rm -rf "$dest"
mkdir -p "$dest"/{bin,lib/ucx,lib/hwloc,tests/gpu,tests/mpi,benchmarks,tools}

real() { [ -x "$(dirname "$1")/.libs/$(basename "$1")" ] && echo "$(dirname "$1")/.libs/$(basename "$1")" || echo "$1"; }
progs=()
for p in tests/gpu/test_device tests/gpu/nccl_plugin_load tests/mpi/test_zcopy tests/mpi/test_cma benchmarks/fr_osu_allreduce \
         benchmarks/fr_osu_bcast tools/fastreduce-tune; do
    cp "$(real "$B/$p")" "$dest/$p"; progs+=("$dest/$p")
done
for p in fastreduce-info fastreduce-topo; do cp "$(real "$B/tools/$p")" "$dest/bin/$p"; progs+=("$dest/bin/$p"); done
for l in libfastreduce libfastreduce-mpi libnccl-tuner-fastreduce; do
    cp -P "$B"/lib/.libs/$l.so* "$dest/lib/"
done
# the launcher: Hydra needs its proxy beside it and nothing else
cp "$(command -v mpiexec.hydra)" "$(command -v hydra_pmi_proxy)" "$dest/bin/" || die "MPICH's Hydra not found"
progs+=("$dest/bin/mpiexec.hydra" "$dest/bin/hydra_pmi_proxy")
# UCX's transports and hwloc's PCI discovery are dlopen'ed plugins: the ones
# that need no RDMA stack: cma, and pci (hwloc reads XML without libxml2)
ucp=$(ldconfig -p | sed -nE 's/.*libucp\.so\.0 .*=> (.*)/\1/p' | head -n 1)
[ -n "$ucp" ] || die "libucp.so.0 is not in ldconfig's cache"
libdir=$(dirname "$ucp")
cp "$libdir"/ucx/libuct_cma.so.0* "$dest/lib/ucx/" 2>/dev/null && progs+=("$dest"/lib/ucx/libuct_cma.so.0.*) ||
    echo "pack.sh: warning: no UCX cma module in $libdir/ucx (shared memory and TCP only)" >&2
[ -f "$libdir/hwloc/hwloc_pci.so" ] && cp "$libdir/hwloc/hwloc_pci.so" "$dest/lib/hwloc/" && progs+=("$dest/lib/hwloc/hwloc_pci.so")
# every library those need, but the C library's, the compiler's, NVIDIA's driver and NCCL
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|libcuda|libnccl)\.so'
{ LD_LIBRARY_PATH=$dest/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "${progs[@]}" "$dest"/lib/*.so* 2>/dev/null || true; } |
    sed -nE 's/^\s*(\S+) => (\/\S+) .*/\1 \2/p' | sort -u | while read -r name path; do
        [[ $name =~ $skip ]] && continue
        [ -e "$dest/lib/$name" ] || cp -L "$path" "$dest/lib/$name"
    done
cp "$top"/tests/gpu/{gpu_check.sh,run_gpu.sh,fake_nodes.sh,test_torch_gpu.py} "$dest/"
mkdir -p "$dest/python/tests" && cp -r "$top/python/fastreduce" "$dest/python/" && rm -rf "$dest/python/fastreduce/__pycache__"
cp "$top/python/tests/test_torch.py" "$dest/python/tests/"
chmod +x "$dest"/*.sh
echo "pack.sh: $(du -sh "$dest" | cut -f1) in $dest:"
(cd "$dest" && find . -type f | sort | sed 's/^/  /')
