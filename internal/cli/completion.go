package cli

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Shells are the shells `formica completion` writes a script for.
var Shells = []string{"bash", "zsh", "fish"}

// builtins are the commands command() answers itself, beside the table,
// with what to say of those the usage text does not list.
var builtins = map[string]string{"completion": "", "help": "print the commands", "version": ""}

// completionSpec is what a completion script offers: every command, with
// its line of the usage text, and each table command's flags.
type completionSpec []completionCommand

type completionCommand struct {
	name, about string
	flags       []completionFlag
	args        []string // fixed positional words (completion's shells)
}

type completionFlag struct {
	name, about string
	value       bool // takes a value (not a boolean flag)
}

// hookMu serialises uses of flagSetMade that collect flag sets.
var hookMu sync.Mutex

// commandFlagSet returns the flag set the table command name builds, as it
// is before parsing, and the command's exit code: the command runs with -h,
// its output discarded.
func commandFlagSet(name string) (*flag.FlagSet, int) {
	cmd, ok := commands[name]
	if !ok {
		return nil, ExitUsage
	}
	hookMu.Lock()
	defer hookMu.Unlock()
	var got *flag.FlagSet
	hook := func(fs *flag.FlagSet) { got = fs }
	flagSetMade.Store(&hook)
	defer flagSetMade.Store(nil)
	code := cmd([]string{"-h"}, Stdio{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	if got != nil {
		got.SetOutput(io.Discard)
	}
	return got, code
}

// usageLines are the usage text's descriptions by command name.
func usageLines() map[string]string {
	about := map[string]string{}
	_, list, _ := strings.Cut(usage, "Commands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		// The description follows two spaces or more.
		rest := strings.TrimLeft(line, " ")
		if i := strings.Index(rest, "  "); i >= 0 {
			about[f[0]] = strings.TrimSpace(rest[i:])
		}
	}
	return about
}

// newCompletionSpec reads the commands from the dispatch table and the
// builtins, their descriptions from the usage text, and each table
// command's flags from its own flag set.
func newCompletionSpec() completionSpec {
	about := usageLines()
	names := slices.Collect(maps.Keys(commands))
	for name, said := range builtins {
		names = append(names, name)
		if about[name] == "" {
			about[name] = said
		}
	}
	slices.Sort(names)
	var s completionSpec
	for _, name := range names {
		c := completionCommand{name: name, about: about[name]}
		if name == "completion" {
			c.args = Shells
		}
		if fs, _ := commandFlagSet(name); fs != nil {
			fs.VisitAll(func(f *flag.Flag) {
				b, ok := f.Value.(interface{ IsBoolFlag() bool })
				c.flags = append(c.flags, completionFlag{name: f.Name, about: firstLine(f.Usage),
					value: !ok || !b.IsBoolFlag()})
			})
		}
		s = append(s, c)
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.ReplaceAll(s, "`", "")
}

// completionCommandMain is `formica completion bash|zsh|fish`.
func completionCommandMain(args []string, stdio Stdio) int {
	const use = "Usage: formica completion bash|zsh|fish\n\n" +
		"Prints a completion script for the formica command line. Load it with\n" +
		"  bash: source <(formica completion bash)\n" +
		"  zsh:  source <(formica completion zsh)    (after compinit)\n" +
		"  fish: formica completion fish | source\n"
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprint(stdio.Err, use)
		return ExitOK
	}
	if len(args) != 1 {
		fmt.Fprint(stdio.Err, use)
		return ExitUsage
	}
	var script string
	switch spec := newCompletionSpec(); args[0] {
	case "bash":
		script = spec.bash()
	case "zsh":
		script = spec.zsh()
	case "fish":
		script = spec.fish()
	default:
		fmt.Fprintf(stdio.Err, "formica: completion: unknown shell %q (want bash, zsh or fish)\n", args[0])
		return ExitUsage
	}
	fmt.Fprint(stdio.Out, script)
	return ExitOK
}

// bash is the bash script: commands at the first word, then the
// command's flags for a word that starts with '-', else files.
func (s completionSpec) bash() string {
	var b strings.Builder
	b.WriteString("# bash completion for formica (formica completion bash)\n")
	b.WriteString("_formica() {\n")
	b.WriteString("    local cur=${COMP_WORDS[COMP_CWORD]}\n")
	b.WriteString("    COMPREPLY=()\n")
	b.WriteString("    if [[ $COMP_CWORD -eq 1 ]]; then\n")
	fmt.Fprintf(&b, "        COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n", strings.Join(s.names(), " "))
	b.WriteString("        return 0\n")
	b.WriteString("    fi\n")
	b.WriteString("    local words=\n")
	b.WriteString("    case ${COMP_WORDS[1]} in\n")
	for _, c := range s {
		var w []string
		for _, f := range c.flags {
			w = append(w, "--"+f.name)
		}
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "        %s) [[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return 0 ;;\n",
				c.name, strings.Join(c.args, " "))
			continue
		}
		if len(w) > 0 {
			fmt.Fprintf(&b, "        %s) words='%s' ;;\n", c.name, strings.Join(w, " "))
		}
	}
	b.WriteString("    esac\n")
	b.WriteString("    if [[ $cur == -* ]]; then\n")
	b.WriteString("        COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n")
	b.WriteString("    fi\n")
	b.WriteString("    return 0\n")
	b.WriteString("}\n")
	b.WriteString("complete -o default -F _formica formica\n")
	return b.String()
}

// zsh is the zsh script: _describe for the commands, _arguments for a
// command's flags (a flag that takes a value completes files).
func (s completionSpec) zsh() string {
	var b strings.Builder
	b.WriteString("#compdef formica\n# zsh completion for formica (formica completion zsh)\n\n")
	b.WriteString("_formica() {\n")
	b.WriteString("    local -a commands\n")
	b.WriteString("    commands=(\n")
	for _, c := range s {
		fmt.Fprintf(&b, "        %s\n", zshQuote(strings.ReplaceAll(c.name, ":", `\:`)+":"+c.about))
	}
	b.WriteString("    )\n")
	b.WriteString("    if (( CURRENT == 2 )); then\n")
	b.WriteString("        _describe -t commands 'formica command' commands\n")
	b.WriteString("        return\n")
	b.WriteString("    fi\n")
	b.WriteString("    shift words\n")
	b.WriteString("    (( CURRENT-- ))\n")
	b.WriteString("    case $words[1] in\n")
	for _, c := range s {
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "        %s) _arguments '1:shell:(%s)' ;;\n", c.name, strings.Join(c.args, " "))
			continue
		}
		if len(c.flags) == 0 {
			continue
		}
		fmt.Fprintf(&b, "        %s) _arguments -S", c.name)
		for _, f := range c.flags {
			spec := "--" + f.name + "[" + zshEscape(f.about) + "]"
			if f.value {
				spec += ":" + f.name + ":_files"
			}
			fmt.Fprintf(&b, " \\\n            %s", zshQuote(spec))
		}
		b.WriteString(" \\\n            '*:argument:_files' ;;\n")
	}
	b.WriteString("    esac\n")
	b.WriteString("}\n\n")
	b.WriteString("if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then\n")
	b.WriteString("    _formica \"$@\"\n")
	b.WriteString("else\n")
	b.WriteString("    compdef _formica formica\n")
	b.WriteString("fi\n")
	return b.String()
}

// fish is the fish script: the commands while none is given, then the
// given command's flags.
func (s completionSpec) fish() string {
	var b strings.Builder
	b.WriteString("# fish completion for formica (formica completion fish)\n")
	b.WriteString("complete -c formica -n __fish_use_subcommand -f\n")
	for _, c := range s {
		fmt.Fprintf(&b, "complete -c formica -n __fish_use_subcommand -f -a %s -d %s\n", fishQuote(c.name), fishQuote(c.about))
	}
	for _, c := range s {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "complete -c formica -n %s -f -a %s\n", cond, fishQuote(strings.Join(c.args, " ")))
		}
		for _, f := range c.flags {
			r := ""
			if f.value {
				r = " -r"
			}
			fmt.Fprintf(&b, "complete -c formica -n %s -l %s%s -d %s\n", cond, fishQuote(f.name), r, fishQuote(f.about))
		}
	}
	return b.String()
}

func (s completionSpec) names() []string {
	var n []string
	for _, c := range s {
		n = append(n, c.name)
	}
	return n
}

// zshQuote single-quotes s for zsh (and bash).
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// zshEscape escapes what _arguments reads in a description.
func zshEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, ":", `\:`).Replace(s)
}

// fishQuote single-quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}
