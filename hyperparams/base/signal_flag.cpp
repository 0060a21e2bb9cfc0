#include "hyperparams/base/signal_flag.h"

#include <csignal>

namespace gcrun {
namespace {

volatile std::sig_atomic_t received_signal = 0;

void remember(int signal) { received_signal = signal; }

}  // namespace

SignalFlag::SignalFlag() {
  received_signal = 0;
  struct sigaction action {};
  action.sa_handler = remember;
  ::sigaction(SIGINT, &action, &previous_int_);
  ::sigaction(SIGTERM, &action, &previous_term_);
}

SignalFlag::~SignalFlag() {
  ::sigaction(SIGINT, &previous_int_, nullptr);
  ::sigaction(SIGTERM, &previous_term_, nullptr);
}

int SignalFlag::received() const { return received_signal; }

}  // namespace gcrun
