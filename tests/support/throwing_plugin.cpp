// A plugin whose gcrun_register fails: with a std::exception, or with GCRUN_THROW_INT anything else.
#include <stdexcept>

extern "C" void gcrun_register() {
#ifdef GCRUN_THROW_INT
  throw 42;
#else
  throw std::runtime_error("the plugin's own failure");
#endif
}
