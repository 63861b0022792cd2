#!/bin/sh
# Launch wrapper for the binding tests: each rank sees its own GPU only, as
# with CUDA_VISIBLE_DEVICES=<its GPU>, on a copy of dgx-8gpu.xml ($FR_CVD_SRC)
# written into $FR_CVD_DIR: local rank l's GPU is GPU 2l mod 8 (PCI order),
# shown as cuda0 as hwloc's CUDA backend would; the other CUDA devices are
# renamed so that nothing takes them for CUDA devices.
l=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}
k=$((2 * l % 8))
FASTREDUCE_TOPO_XML=$FR_CVD_DIR/cvd-local$l.xml
sed -e 's/name="cuda\([0-9]\)"/name="hidden\1"/' -e "s/name=\"hidden$k\"/name=\"cuda0\"/" "$FR_CVD_SRC" \
    >"$FASTREDUCE_TOPO_XML" || exit 1
export FASTREDUCE_TOPO_XML
exec "$@"
