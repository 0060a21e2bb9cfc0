# What the LibTorch in use offers, as compile definitions for gcrun_common:
#  - c10d's backend headers are empty unless USE_C10D_GLOO / USE_C10D_NCCL are defined;
#  - NCCL code is compiled only when this Torch was built with CUDA (Debian's 1.13 is CPU-only).
set(GCRUN_TORCH_DEFINITIONS USE_C10D_GLOO)
set(GCRUN_HAVE_NCCL OFF)
if(CAFFE2_USE_CUDA OR TORCH_CUDA_LIBRARIES)
  find_path(GCRUN_NCCL_HEADER torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(GCRUN_NCCL_HEADER)
    set(GCRUN_HAVE_NCCL ON)
    list(APPEND GCRUN_TORCH_DEFINITIONS USE_C10D_NCCL GCRUN_WITH_NCCL)
  endif()
endif()
if(CAFFE2_USE_CUDA OR TORCH_CUDA_LIBRARIES)
  list(APPEND GCRUN_TORCH_DEFINITIONS GCRUN_WITH_CUDA)
endif()
message(STATUS "gcrun: Torch ${Torch_VERSION}, NCCL support: ${GCRUN_HAVE_NCCL}")
