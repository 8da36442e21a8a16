// Package execsh stands in for /bin/sh in images that have no shell. It
// takes `sh -c 'command words'`, the way compose tools and podman wrap a
// healthcheck (podman-compose 1.0 turns every healthcheck, exec form
// included, into `/bin/sh -c ...`; podman runs a CMD-SHELL check as
// `/bin/sh -c ...` again), splits the words as a shell does (quotes and
// backslashes) and executes the program in its place. Anything else a
// shell does (pipes, lists, redirections, variables, globs) is refused with
// exit status 2: it is not a shell, only a way to run one command.
package execsh

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Main runs `sh -c COMMAND [NAME [ARGS...]]` (args without the program
// name). It returns an exit status only when it could not execute the
// command: 2 for a usage or syntax it does not take, 127 for a program
// not found, 126 for one that cannot be executed.
func Main(args []string, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "-c" {
		fmt.Fprintln(stderr, "sh: this image has no shell; only `sh -c 'COMMAND ARGS...'` is taken, to run one program")
		return 2
	}
	words, err := Split(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "sh: %v (this image has no shell: one program with arguments only)\n", err)
		return 2
	}
	if len(words) == 0 {
		return 0
	}
	path, err := exec.LookPath(words[0])
	if err != nil {
		fmt.Fprintf(stderr, "sh: %s: not found\n", words[0])
		return 127
	}
	err = syscall.Exec(path, words, os.Environ())
	fmt.Fprintf(stderr, "sh: %s: %v\n", words[0], err)
	return 126
}

// Split splits a command line into words as a POSIX shell does for a
// simple command: blanks separate words, single quotes keep everything
// literally, double quotes keep everything but \" \\ \$ \` (escaped), a
// backslash outside quotes escapes the next character. Unquoted shell
// syntax (; & | < > ( ) $ ` * ? [ ~ # and newlines) is an error.
func Split(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				switch {
				case line[i] == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`\n", line[i+1]) >= 0:
					i++
					w.WriteByte(line[i])
				case line[i] == '$' || line[i] == '`':
					return nil, fmt.Errorf("%q in double quotes: no expansion here", line[i])
				default:
					w.WriteByte(line[i])
				}
			}
			if i >= len(line) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(line) {
				return nil, errors.New("trailing backslash")
			}
			i++
			w.WriteByte(line[i])
			inWord = true
		case strings.IndexByte(";&|<>()$`*?[\n", c) >= 0 || (c == '#' || c == '~') && !inWord:
			return nil, fmt.Errorf("shell syntax %q is not taken", c)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
