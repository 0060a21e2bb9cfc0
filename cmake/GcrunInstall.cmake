# `cmake --install`: the gcrun executable, the headers of the extension points, and the package
# config that exports gcrun::plugin; `cpack -G DEB` packages the same files.
include(GNUInstallDirs)
# Installing (and cpack) takes what is built, so that packaging gcrun does not first build every
# test suite: build the gcrun target before.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)
include(CMakePackageConfigHelpers)

install(TARGETS gcrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# SentencePiece's module, where gcrun looks for it (tasks/tokenizers/sentencepiece_module.h).
install(TARGETS gcrun_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/gcrun)

# The extension points and every gcrun header they include: a plugin needs no other. The install
# test checks that each installed header's includes are installed too.
set(GCRUN_PUBLIC_HEADERS
  reducers/reducer.h reducers/tensor_buffer.h reducers/comm/communicator.h
  tasks/task.h tasks/model_size.h tasks/model_plan.h outputs/metric_sink.h
  hyperparams/config.h hyperparams/settings.h hyperparams/rules.h
  hyperparams/base/registry.h hyperparams/base/errors.h hyperparams/base/tensor_map.h
  hyperparams/base/collective.h hyperparams/base/baseline.h)
foreach(header ${GCRUN_PUBLIC_HEADERS})
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gcrun/${folder})
endforeach()

install(TARGETS gcrun_plugin EXPORT gcrunTargets)
set(GCRUN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gcrun)
install(EXPORT gcrunTargets NAMESPACE gcrun:: DESTINATION ${GCRUN_CMAKE_DIR})
configure_package_config_file(cmake/gcrunConfig.cmake.in ${PROJECT_BINARY_DIR}/gcrunConfig.cmake
  INSTALL_DESTINATION ${GCRUN_CMAKE_DIR} PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
# Plugins use gcrun's headers as they are, so a plugin is built for one minor version.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gcrunConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gcrunConfig.cmake ${PROJECT_BINARY_DIR}/gcrunConfigVersion.cmake
  DESTINATION ${GCRUN_CMAKE_DIR})
# Shell completion, the scripts `gcrun completion bash|zsh` prints: bash-completion loads its file
# when `gcrun` is first completed, Debian's zsh looks in vendor-completions.
install(FILES cli/completion/gcrun.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME gcrun)
install(FILES cli/completion/gcrun.zsh DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions RENAME _gcrun)
# The example plugins, as a project to copy.
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# A Debian package of the same files. dpkg-shlibdeps derives the libraries' packages (libtorch,
# spdlog, fmt, yaml-cpp, zlib) from the binary; Gloo comes with LibTorch, and OpenBLAS is listed
# because Debian's reference BLAS makes LibTorch's matmuls ~40x slower.
set(CPACK_PACKAGE_NAME gcrun)
set(CPACK_PACKAGE_VENDOR gcrun)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Gradient-compression experiments (PowerSGD and others) on LibTorch")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "gcrun maintainers <gcrun@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libgloo0, libopenblas0-pthread")
# What building a plugin against the installed headers needs.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libtorch-dev, libgloo-dev, cmake, g++")
include(CPack)
