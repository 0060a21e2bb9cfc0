# bash completion for gcrun (`gcrun completion bash`; installed as
# share/bash-completion/completions/gcrun). The candidates come from the gcrun being completed,
# `gcrun completion --words -- WORD...`, one per line; they are compared and assigned, never
# evaluated.
_gcrun() {
  local line=${COMP_LINE:0:COMP_POINT}
  local -a words
  # The line's words split at white space (no quotes, no expansion), and an empty one to complete
  # after a space.
  read -r -a words <<<"$line"
  [[ $line =~ [[:space:]]$ ]] && words+=("")
  local current=${words[${#words[@]} - 1]}
  # Readline replaces only what follows the word's last '=' or ':' (COMP_WORDBREAKS).
  local prefix=""
  [[ $current == *[=:]* ]] && prefix=${current%"${current##*[=:]}"}
  COMPREPLY=()
  local candidate
  while IFS= read -r candidate; do
    COMPREPLY+=("${candidate#"$prefix"}")
  done < <("${words[0]}" completion --words -- "${words[@]:1}" 2>/dev/null)
  # A key ("reducer.name=") takes its value straight after.
  if [[ ${#COMPREPLY[@]} -gt 0 && ${COMPREPLY[0]} == *= ]]; then
    compopt -o nospace 2>/dev/null
  fi
  return 0
}
complete -o default -F _gcrun gcrun
