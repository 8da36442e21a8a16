package quotaserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// answer is one reply laid out for sending: its content cut into pieces,
// each due at an offset from the start, so the streamed and the plain
// answer carry the same content and take the same time.
type answer struct {
	id, model    string
	created      int64
	calls        []ToolCall
	pieces       []piece
	end          time.Duration // when the answer is complete
	inputTokens  int
	outputTokens int
	includeUsage bool
}

type pieceKind int

const (
	textPiece pieceKind = iota // text to append
	callStart                  // a tool call begins: id and name
	callArgs                   // a fragment of the current call's arguments
)

type piece struct {
	kind pieceKind
	text string // textPiece, callArgs
	call int    // callStart, callArgs: index into answer.calls
	at   time.Duration
}

// argsPiece is the size of an argument fragment: small enough that even
// short arguments arrive in several deltas, as from a real model.
const argsPiece = 16

// filler is the text StreamFor adds every ChunkEvery.
const filler = "."

// layout lays out reply for req under cfg: the content pieces spread
// evenly over Latency, the first at once, then StreamFor's filler.
func layout(cfg Config, req Request, reply Reply, id string, now time.Time) *answer {
	a := &answer{id: id, model: req.Model, created: now.Unix(), inputTokens: req.InputTokens,
		includeUsage: req.includeUsage, end: cfg.Latency + cfg.StreamFor}
	for _, w := range words(reply.Text) {
		a.pieces = append(a.pieces, piece{kind: textPiece, text: w})
	}
	for i, c := range reply.ToolCalls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d", i+1)
		}
		if !isObject(c.Arguments) {
			c.Arguments = "{}"
		}
		a.calls = append(a.calls, c)
		a.pieces = append(a.pieces, piece{kind: callStart, call: i})
		for _, frag := range cut(c.Arguments, argsPiece) {
			a.pieces = append(a.pieces, piece{kind: callArgs, text: frag, call: i})
		}
	}
	n := len(a.pieces)
	for j := range a.pieces {
		a.pieces[j].at = cfg.Latency * time.Duration(j) / time.Duration(n)
	}
	if cfg.StreamFor > 0 {
		for k := time.Duration(1); k*cfg.ChunkEvery <= cfg.StreamFor; k++ {
			a.pieces = append(a.pieces, piece{kind: textPiece, text: filler, at: cfg.Latency + k*cfg.ChunkEvery})
		}
	}
	size := 0
	for _, p := range a.pieces {
		size += len(p.text)
	}
	for _, c := range a.calls {
		size += len(c.Name)
	}
	a.outputTokens = size/4 + 1
	return a
}

// reason is the answer's stop reason in the provider's words: tool when
// it calls tools, else stop.
func (a *answer) reason(tool, stop string) string {
	if len(a.calls) > 0 {
		return tool
	}
	return stop
}

// text is the answer's whole text.
func (a *answer) text() string {
	var b strings.Builder
	for _, p := range a.pieces {
		if p.kind == textPiece {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

// block is a run of content: text, or one tool call.
type block struct {
	text string
	call int // -1 for text
}

// blocks groups the pieces as Anthropic's content blocks: consecutive text
// pieces share a block; each tool call is one.
func (a *answer) blocks() []block {
	var out []block
	for _, p := range a.pieces {
		switch p.kind {
		case textPiece:
			if len(out) > 0 && out[len(out)-1].call < 0 {
				out[len(out)-1].text += p.text
			} else {
				out = append(out, block{text: p.text, call: -1})
			}
		case callStart:
			out = append(out, block{call: p.call})
		}
	}
	return out
}

// words cuts s after each space, so joined again the pieces are s.
func words(s string) []string {
	return slices.DeleteFunc(strings.SplitAfter(s, " "), func(w string) bool { return w == "" })
}

// cut cuts s into pieces of about size bytes, never inside a UTF-8
// sequence (a split rune would not survive JSON encoding).
func cut(s string, size int) []string {
	var out []string
	for len(s) > size {
		i := size
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		if i == 0 {
			_, i = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// isObject reports whether s is a JSON object, as tool arguments must be.
func isObject(s string) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &v) == nil && v != nil
}
