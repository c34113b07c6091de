# bash completion for sbx (installed as
# <datadir>/bash-completion/completions/sbx).

_sbx()
{
    local cur prev words cword
    _init_completion || return

    local commands="run providers check conformance create exec ps attach logs send
        kill read write ls stat mkdir rm mv port export destroy sessions snapshot
        restore state resume memory reconcile"
    local cmd="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        -c | --config) ((i++)) ;;
        -*) ;;
        *) cmd=${words[i]}; break ;;
        esac
    done

    if [[ $cmd == kill && ( $prev == -s || $prev == --signal ) ]]; then
        COMPREPLY=($(compgen -W "HUP INT QUIT KILL USR1 USR2 TERM CONT STOP TSTP WINCH" -- "$cur"))
        return
    fi
    case $prev in
    -c | --config | --manifest | -m | --from-snapshot | -s | --junit)
        _filedir
        return
        ;;
    -p | --provider)
        local names
        names=$(sbx providers 2>/dev/null | awk 'NR > 1 { print $1 }')
        COMPREPLY=($(compgen -W "$names" -- "$cur"))
        return
        ;;
    -r | --require)
        COMPREPLY=($(compgen -W "file_mounts output_export skills memory egress packages users processes pty file_ops ports" -- "$cur"))
        return
        ;;
    esac

    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$commands --config --help --version" -- "$cur"))
        return
    fi

    local opts="--config --help"
    case $cmd in
    run) opts+=" --provider --manifest --port --timeout --cwd --env --stdin --no-stdin" ;;
    exec) opts+=" --provider --manifest --tty --detach --yield --max-bytes --json
        --timeout --cwd --env --stdin --no-stdin" ;;
    ps) opts+=" --json" ;;
    attach) opts+=" --since --no-stdin" ;;
    logs) opts+=" --since --follow" ;;
    send) opts+=" --close --yield --since --max-bytes --json" ;;
    kill) opts+=" --signal" ;;
    ls) opts+=" --json" ;;
    stat) opts+=" --json" ;;
    mkdir) opts+=" --parents --mode" ;;
    rm) opts+=" --recursive" ;;
    mv) opts+=" --no-clobber" ;;
    port) opts+=" --json" ;;
    create) opts+=" --provider --package --port --allow --setup-allow --no-network --manifest
        --memory --from-snapshot --require" ;;
    write) opts+=" --mode" ;;
    snapshot) opts+=" --gzip --zstd" ;;
    resume) opts+=" --manifest" ;;
    sessions) opts+=" --json" ;;
    providers) opts+=" --json --keys" ;;
    conformance) opts+=" --junit --tap --filter" ;;
    reconcile) opts+=" --watch --interval --lease --metrics" ;;
    memory)
        local actions="create delete list ls cat log put rm resolve"
        if [[ ${words[i + 1]-} == "$cur" ]]; then
            COMPREPLY=($(compgen -W "$actions" -- "$cur"))
            return
        fi
        opts+=" --json --at --base --force --max-file-size --max-files --max-total-size
            --keep --discard"
        ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ $cmd == snapshot || $cmd == restore || $cmd == export ]]; then
        _filedir
    fi
}
complete -F _sbx sbx
