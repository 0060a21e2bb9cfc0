#compdef gcrun
# zsh completion for gcrun (`gcrun completion zsh`: source it, or save it as _gcrun in a directory
# of $fpath). The candidates come from the gcrun being completed, `gcrun completion --words --
# WORD...`, one per line; they are compared and added, never evaluated.
_gcrun() {
  local -a found
  found=("${(@f)$("${words[1]}" completion --words -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  found=("${(@)found:#}")
  if (( ${#found} == 0 )); then
    _files
    return
  fi
  # A key ("reducer.name=") takes its value straight after.
  compadd -S '' -- "${(@M)found:#*=}"
  compadd -- "${(@)found:#*=}"
}
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
  _gcrun "$@"
else
  compdef _gcrun gcrun
fi
