# What the LibTorch in use offers, as compile definitions for gcrun_common:
#  - c10d's backend headers are empty unless USE_C10D_GLOO / USE_C10D_NCCL are defined;
#  - NCCL code is compiled only when this Torch was built with CUDA (Debian's 1.13 is CPU-only)
#    and nccl.h is found (GCRUN_NCCL_INCLUDE_DIR, GCRUN_NCCL_LIBRARY: used by gcrun_comm alone).
set(GCRUN_TORCH_DEFINITIONS USE_C10D_GLOO)
set(GCRUN_HAVE_NCCL OFF)
if(CAFFE2_USE_CUDA OR TORCH_CUDA_LIBRARIES)
  find_path(GCRUN_NCCL_HEADER torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
  # c10d's NCCL header includes <nccl.h>: in /usr/include from libnccl-dev, or in a pip install's
  # site-packages/nvidia/nccl (add that folder to CMAKE_PREFIX_PATH, as scripts/gpu-check does).
  find_path(GCRUN_NCCL_INCLUDE_DIR nccl.h)
  find_library(GCRUN_NCCL_LIBRARY NAMES nccl libnccl.so.2)
  if(GCRUN_NCCL_HEADER AND NOT GCRUN_NCCL_INCLUDE_DIR)
    message(WARNING "gcrun: this Torch has NCCL but nccl.h was not found; building without NCCL "
                    "(put the folder holding include/nccl.h on CMAKE_PREFIX_PATH)")
  elseif(GCRUN_NCCL_HEADER)
    set(GCRUN_HAVE_NCCL ON)
    list(APPEND GCRUN_TORCH_DEFINITIONS USE_C10D_NCCL GCRUN_WITH_NCCL)
  endif()
endif()
if(CAFFE2_USE_CUDA OR TORCH_CUDA_LIBRARIES)
  list(APPEND GCRUN_TORCH_DEFINITIONS GCRUN_WITH_CUDA)
endif()
message(STATUS "gcrun: Torch ${Torch_VERSION}, NCCL support: ${GCRUN_HAVE_NCCL}")
