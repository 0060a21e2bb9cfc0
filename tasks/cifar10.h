#pragma once

#include <memory>
#include <string>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "tasks/task.h"

namespace gcrun::tasks {

// The folder of the CIFAR-10 binary distribution ("CIFAR-10 binary version" of
// https://www.cs.toronto.edu/~kriz/cifar.html, cifar-10-binary.tar.gz). With task.data_dir empty
// the task reads $GCRUN_DATA/cifar-10-batches-bin, then ./data/cifar-10-batches-bin; a data_dir
// that holds this folder (rather than the files) is accepted too.
inline constexpr const char* kCifar10Folder = "cifar-10-batches-bin";

struct CifarSplit {
  at::Tensor images;  // uint8 [N, 3, 32, 32], channel-major as stored
  at::Tensor labels;  // uint8 [N], in [0, 10)
};

struct Cifar10Data {
  CifarSplit train;  // data_batch_1.bin ... data_batch_5.bin, in that order
  CifarSplit test;   // test_batch.bin
};

// Reads the six files of 3073-byte records (1 label byte, then 3072 pixel bytes). A UserError
// names every expected file when any is missing, and the file and byte offset of a truncated
// record or of a label above 9.
Cifar10Data readCifar10(const std::string& dir);

// The reference's test transform: uint8 [B, 3, 32, 32] -> float, /255, normalised per channel
// with mean (0.4914, 0.4822, 0.4465) and std (0.2023, 0.1994, 0.2010).
at::Tensor normalizeCifar(const at::Tensor& images);

// The reference's train transform: RandomCrop(32, padding 4) with zero padding, then a random
// horizontal flip, each drawn per image from `generator`; then normalizeCifar().
at::Tensor augmentCifar(const at::Tensor& images, at::Generator& generator);

// The `cifar10` task: 50,000 train and 10,000 test images, the model named by task.architecture
// (resnet18, vgg16), cross-entropy loss; metrics cross_entropy, accuracy and top5_accuracy.
// Training batches are augmented with a generator seeded by (seed, rank, epoch) and prepared on a
// background thread.
std::unique_ptr<Task> makeCifar10Task(const TaskContext& context);
// TaskSpec::check: its settings, data and each worker's share of batches, without a model.
void checkCifar10Input(const TaskContext& context, int world_size);
// Its model's size (TaskSpec::size).
ModelSize cifar10ModelSize(const TaskOptions& options, int64_t batch_size);
// Its model for `gcrun plan` (TaskSpec::plan).
ModelPlan cifar10ModelPlan(const TaskOptions& options, int64_t batch_size);

}  // namespace gcrun::tasks
