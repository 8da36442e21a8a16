package sim

import (
	"fmt"
	"strings"
)

// part is one top-level item of a task's list.
type part struct {
	name string // slug used as the helper's name
	task string // the item's line followed by its de-indented sub-lines
}

// splitParts finds the task's parts: the lines starting with "- " at the
// least indentation of any such line. Each part's task is its line text
// without the "- ", followed by the lines indented deeper below it, de-indented
// by their common indentation, so nested lists become nested helper trees:
// "- a\n  - a1\n  - a2" gives one part "a\n- a1\n- a2". Any line at or above
// the list's indentation that is not an item ends the item before it.
// Indentation counts leading spaces and tabs, one each.
func splitParts(task string) []part {
	lines := strings.Split(strings.ReplaceAll(task, "\r\n", "\n"), "\n")
	base := -1
	for _, l := range lines {
		if ind := indent(l); strings.HasPrefix(l[ind:], "- ") && (base < 0 || ind < base) {
			base = ind
		}
	}
	if base < 0 {
		return nil
	}
	var texts []string
	var cur []string // current item: its text, then its raw sub-lines
	flush := func() {
		if cur != nil {
			texts = append(texts, strings.Join(append([]string{cur[0]}, dedent(cur[1:])...), "\n"))
			cur = nil
		}
	}
	for _, l := range lines {
		ind := indent(l)
		blank := strings.TrimSpace(l) == ""
		switch {
		case !blank && ind == base && strings.HasPrefix(l[ind:], "- "):
			flush()
			cur = []string{strings.TrimSpace(l[ind+2:])}
		case cur != nil && (blank || ind > base):
			cur = append(cur, l)
		default:
			flush()
		}
	}
	flush()
	parts := make([]part, len(texts))
	seen := map[string]bool{}
	for i, t := range texts {
		name := slug(t, i+1)
		for seen[name] {
			name = fmt.Sprintf("%s-%d", name, i+1)
		}
		seen[name] = true
		parts[i] = part{name: name, task: t}
	}
	return parts
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " \t")) }

// dedent drops trailing blank lines and the sub-lines' common indentation.
func dedent(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	least := -1
	for _, l := range lines {
		if strings.TrimSpace(l) != "" && (least < 0 || indent(l) < least) {
			least = indent(l)
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue // blank lines stay, empty
		}
		out[i] = strings.TrimRight(l[least:], " \t")
	}
	return out
}

// maxSlug bounds a helper name derived from text.
const maxSlug = 32

// slug names a helper after the first line of its task: the ASCII letters
// and digits of it, lowercased, words joined by '-', cut at a word boundary
// to at most 32 characters (a single longer word is cut at 32). With no
// letters or digits it is "part-N", N the part's 1-based position.
// splitParts adds "-N" to a repeated slug, so names within one response are
// unique. Every result matches ^[A-Za-z0-9._-]{1,64}$.
func slug(text string, n int) string {
	first, _, _ := strings.Cut(text, "\n")
	words := strings.FieldsFunc(strings.ToLower(first), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	})
	s := ""
	for _, w := range words {
		next := w
		if s != "" {
			next = s + "-" + w
		}
		if len(next) > maxSlug {
			if s == "" {
				s = w[:maxSlug]
			}
			break
		}
		s = next
	}
	if s == "" {
		return fmt.Sprintf("part-%d", n)
	}
	return s
}
