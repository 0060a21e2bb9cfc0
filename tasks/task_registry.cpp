#include "tasks/fashion_mnist.h"
#include "tasks/task.h"

namespace gcrun::tasks {

Registry<TaskFactory>& taskRegistry() {
  static Registry<TaskFactory> registry = [] {
    Registry<TaskFactory> builtins("task");
    builtins.add("fashion-mnist",
                 "Fashion-MNIST (28x28 grayscale, 10 classes) from the Debian package "
                 "dataset-fashion-mnist; architectures cnn, resnet18",
                 makeFashionMnistTask);
    return builtins;
  }();
  return registry;
}

}  // namespace gcrun::tasks
