#include "tasks/cifar10.h"
#include "tasks/fashion_mnist.h"
#include "tasks/language_model.h"
#include "tasks/task.h"
#include "tasks/wikitext.h"

namespace gcrun::tasks {

Registry<TaskSpec>& taskRegistry() {
  static Registry<TaskSpec> registry = [] {
    Registry<TaskSpec> builtins("task");
    builtins.add("fashion-mnist",
                 "Fashion-MNIST (28x28 grayscale, 10 classes) from the Debian package "
                 "dataset-fashion-mnist; architectures cnn, resnet18",
                 {makeFashionMnistTask, {}, fashionMnistModelSize, checkFashionMnistInput, fashionMnistModelPlan});
    builtins.add("cifar10",
                 "CIFAR-10 (32x32 RGB, 10 classes) from its binary version, with the reference's "
                 "crop-and-flip augmentation; architectures resnet18, vgg16",
                 {makeCifar10Task, {}, cifar10ModelSize, checkCifar10Input, cifar10ModelPlan});
    builtins.add("wikitext2",
                 "word-level language modelling on WikiText-2 (or any folder of wiki.*.tokens files, "
                 "e.g. the Brown corpus from `gcrun data brown`); architecture lstm",
                 {makeWikiText2Task, {}, wikiText2ModelSize, checkWikiText2Input, wikiText2ModelPlan});
    builtins.add("language-model",
                 "char- or word-level language modelling with nanoGPT's GPT on a folder of wiki.*.tokens "
                 "files (task.data_dir, default WikiText-2's); architecture gpt",
                 {makeLanguageModelTask, languageModelSettings().specs(), languageModelSize, checkLanguageModelInput,
                  languageModelPlan, LanguageModelFacts{}});
    return builtins;
  }();
  return registry;
}

}  // namespace gcrun::tasks
