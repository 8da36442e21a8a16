// Package envflag lets every flag of every Formica program be set from the
// environment, so the same binaries run unchanged under compose, Kubernetes
// or systemd. It works on a standard flag.FlagSet after all flags are
// registered, so a flag added anywhere is covered without further code.
//
// The variable of flag --some-flag is FORMICA_SOME_FLAG (upper case, '-' and
// '.' become '_'). Precedence: the command line, then the variable, then the
// flag's default. A few flags also answer to a conventional name after their
// own (--nats: NATS_URL). --help shows each flag's variables.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Prefix starts every flag's environment variable.
const Prefix = "FORMICA_"

// aliases are further variables a flag falls back to, in order, when its
// own is unset: names other tools already use for the same setting.
var aliases = map[string][]string{
	"nats": {"NATS_URL"},
}

// noEnv are flags that act instead of configuring, so a variable must never
// trigger them (FORMICA_VERSION may well hold an image tag).
var noEnv = map[string]bool{"version": true, "help": true, "h": true}

// Name is the environment variable of the flag called flagName.
func Name(flagName string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return Prefix + strings.ToUpper(r.Replace(flagName))
}

// Vars are the variables flagName reads, in order of precedence; none for
// flags that never come from the environment.
func Vars(flagName string) []string {
	if noEnv[flagName] {
		return nil
	}
	return append([]string{Name(flagName)}, aliases[flagName]...)
}

// marker opens the variables in a usage, so Annotate is idempotent.
const marker = " [$"

// Annotate appends each flag's variables to its usage, so --help shows
// them. Call it once all flags are registered and before parsing.
func Annotate(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		vars := Vars(f.Name)
		if len(vars) == 0 || strings.Contains(f.Usage, marker) {
			return
		}
		f.Usage += marker + strings.Join(vars, ", $") + "]"
	})
}

// Apply sets every flag that the command line did not set from the first of
// its variables that lookup (like os.LookupEnv) finds set (an empty value
// counts as set: it clears a default). Call it after parsing. Errors name
// the variable and the flag.
//
// A value from the environment stands in for the default: fs.Visit still
// lists only the flags given on the command line, for a program whose
// precedence puts something between the two (formica run: --model, then
// the spec's model, then $FORMICA_MODEL).
func Apply(fs *flag.FlagSet, lookup func(name string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) { // in name order
		if given[f.Name] {
			return
		}
		for _, v := range Vars(f.Name) {
			val, ok := lookup(v)
			if !ok {
				continue
			}
			if err := f.Value.Set(val); err != nil {
				errs = append(errs, fmt.Errorf("$%s: invalid value %q for flag --%s: %w", v, val, f.Name, err))
			}
			break
		}
	})
	return errors.Join(errs...)
}

// Parse annotates fs, parses args, and fills the rest from the process
// environment. An error from the environment is printed to fs.Output with
// the usage, like a bad flag.
func Parse(fs *flag.FlagSet, args []string) error {
	return ParseWith(fs, func() error { return fs.Parse(args) })
}

// ParseWith is Parse with the caller's own parsing (for commands whose
// positional arguments and flags mix).
func ParseWith(fs *flag.FlagSet, parse func() error) error {
	Annotate(fs)
	if err := parse(); err != nil {
		return err
	}
	if err := Apply(fs, os.LookupEnv); err != nil {
		fmt.Fprintln(fs.Output(), err)
		return err
	}
	return nil
}

// Secret is a secret given inline (value, of flag valueFlag) or kept in a
// file (file, of flag fileFlag, read by ReadSecret); giving both is an
// error. Errors name the flags, never the secret.
func Secret(value, file, valueFlag, fileFlag string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("give %s or %s, not both", valueFlag, fileFlag)
	}
	s, err := ReadSecret(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fileFlag, err)
	}
	return s, nil
}

// ReadSecret reads a secret kept in a file (a mounted Kubernetes or compose
// secret), so it need not sit on a command line or in the environment.
// Surrounding white space, the final newline included, is dropped; an
// empty file is an error.
func ReadSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s: %w", path, ErrEmptySecret)
	}
	return s, nil
}

// ErrEmptySecret is returned for a secret file without content.
var ErrEmptySecret = errors.New("empty secret file")
