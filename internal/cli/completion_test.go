package cli

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// completionScript is what `formica completion shell` prints.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var out, errs bytes.Buffer
	if code := Main([]string{"completion", shell}, Stdio{In: strings.NewReader(""), Out: &out, Err: &errs}); code != ExitOK {
		t.Fatalf("formica completion %s: exit %d: %s", shell, code, errs.String())
	}
	return out.String()
}

// allCommands are the dispatch table's commands and the builtins.
func allCommands() []string {
	var names []string
	for name := range commands {
		names = append(names, name)
	}
	for name := range builtins {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Every command the CLI dispatches is in its usage text, which the
// scripts take their descriptions from.
func TestUsageNamesEveryCommand(t *testing.T) {
	about := usageLines()
	for name := range commands {
		if about[name] == "" {
			t.Errorf("the usage text does not describe %q", name)
		}
	}
}

// TestCompletionScripts: each shell's script names every command and,
// for each table command, every flag of its flag set, and parses in its
// shell where that shell is installed (bash -n, zsh -n, fish -n).
func TestCompletionScripts(t *testing.T) {
	for _, shell := range Shells {
		t.Run(shell, func(t *testing.T) {
			script := completionScript(t, shell)
			for _, name := range allCommands() {
				var want string
				switch shell {
				case "bash":
					want = " " + name + " "
					if !strings.Contains(strings.ReplaceAll(script, "'", " "), want) {
						t.Errorf("the bash script does not name %q", name)
					}
					continue
				case "zsh":
					want = "'" + name + ":"
				case "fish":
					want = "-a '" + name + "'"
				}
				if !strings.Contains(script, want) {
					t.Errorf("the %s script does not name %q (%s)", shell, name, want)
				}
			}
			for name := range commands {
				fs, _ := commandFlagSet(name)
				if fs == nil {
					t.Fatalf("%s: no flag set", name)
				}
				section := commandSection(shell, script, name)
				if section == "" {
					t.Errorf("the %s script has no flags for %s", shell, name)
					continue
				}
				for _, f := range flagNames(fs) {
					want := "--" + f
					if shell == "fish" {
						want = "-l '" + f + "'"
					}
					if !containsWord(section, want) {
						t.Errorf("the %s script lacks %s for %s", shell, want, name)
					}
				}
			}
			check := map[string][]string{"bash": {"-n"}, "zsh": {"-n"}, "fish": {"--no-execute"}}[shell]
			path, err := exec.LookPath(shell)
			if err != nil {
				t.Skipf("%s is not installed: the script is not parsed", shell)
			}
			file := filepath.Join(t.TempDir(), "formica."+shell)
			if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(path, append(check, file)...).CombinedOutput(); err != nil {
				t.Errorf("%s %v: %v\n%s", shell, check, err, out)
			}
		})
	}
}

// commandSection is the part of script that completes command name's
// flags.
func commandSection(shell, script, name string) string {
	var b strings.Builder
	lines := strings.Split(script, "\n")
	for i, line := range lines {
		switch shell {
		case "bash":
			if strings.HasPrefix(strings.TrimSpace(line), name+") ") {
				return line
			}
		case "zsh":
			if strings.HasPrefix(strings.TrimSpace(line), name+") _arguments") {
				for _, l := range lines[i:] {
					b.WriteString(l + "\n")
					if strings.HasSuffix(l, ";;") {
						return b.String()
					}
				}
			}
		case "fish":
			if strings.Contains(line, "'__fish_seen_subcommand_from "+name+"'") {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// containsWord reports whether want occurs in s followed by no more of a
// flag name (so --nats does not count for --nats-ca).
func containsWord(s, want string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], want)
		if j < 0 {
			return false
		}
		end := i + j + len(want)
		if end == len(s) || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789-", rune(s[end])) {
			return true
		}
		i = end
	}
}

// TestBashCompletionCompletes: sourced into bash, the script completes a
// command's prefix, a command's flags, and completion's shells.
func TestBashCompletionCompletes(t *testing.T) {
	path, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	file := filepath.Join(t.TempDir(), "formica.bash")
	if err := os.WriteFile(file, []byte(completionScript(t, "bash")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		words string
		want  []string
	}{
		{"formica sub", []string{"submit"}},
		{"formica w", []string{"watch", "workers"}},
		{"formica submit --bud", []string{"--budget-duration", "--budget-spawns", "--budget-tokens", "--budget-usd"}},
		{"formica run TASK --no-t", []string{"--no-tty"}},
		{"formica completion ", []string{"bash", "fish", "zsh"}},
	} {
		script := `source "$1"; COMP_WORDS=(` + c.words + `); [[ "` + c.words + `" == *" " ]] && COMP_WORDS+=(""); ` +
			`COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _formica; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command(path, "-c", script, "bash", file).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", c.words, err, out)
		}
		got := strings.Fields(string(out))
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q completes to %v, want %v", c.words, got, c.want)
		}
	}
}

// An unknown shell, or none, is a usage error.
func TestCompletionUsage(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		var out bytes.Buffer
		if code := Main(args, Stdio{Out: &out, Err: &bytes.Buffer{}}); code != ExitUsage || out.Len() != 0 {
			t.Errorf("formica %v: exit %d, printed %q; want %d and nothing", args, code, out.String(), ExitUsage)
		}
	}
}

// flagNames are fs's flags' names.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}
