package event

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends e's JSON to dst: exactly the bytes encoding/json
// writes for an Event (field order, omitted empty fields, escaping of
// control characters, <, >, &, U+2028, U+2029 and invalid UTF-8), written
// by hand because every event of a run is encoded once by its coordinator
// and the reflective encoder cost most of that. TestAppendJSONIsEncodingJSON
// and FuzzAppendJSON hold it to encoding/json's output.
func AppendJSON(dst []byte, e *Event) ([]byte, error) {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, string(e.Type))
	dst = append(dst, `,"time":"`...)
	dst, err := e.Time.AppendText(dst)
	if err != nil {
		return dst, fmt.Errorf("event: encode %s: %w", e.Type, err)
	}
	dst = append(dst, `","run_id":`...)
	dst = appendString(dst, e.RunID)
	dst = appendField(dst, `,"thread_id":`, e.ThreadID)
	dst = appendField(dst, `,"parent_id":`, e.ParentID)
	dst = append(dst, `,"depth":`...)
	dst = strconv.AppendInt(dst, int64(e.Depth), 10)
	dst = appendField(dst, `,"name":`, e.Name)
	dst = appendField(dst, `,"status":`, string(e.Status))
	dst = appendField(dst, `,"reason":`, e.Reason)
	dst = appendField(dst, `,"worker":`, e.Worker)
	dst = appendField(dst, `,"model":`, e.Model)
	dst = appendField(dst, `,"endpoint":`, e.Endpoint)
	if e.Usage.InputTokens != 0 || e.Usage.OutputTokens != 0 {
		dst = append(dst, `,"usage":{"input_tokens":`...)
		dst = strconv.AppendInt(dst, e.Usage.InputTokens, 10)
		dst = append(dst, `,"output_tokens":`...)
		dst = strconv.AppendInt(dst, e.Usage.OutputTokens, 10)
		dst = append(dst, '}')
	}
	if e.Latency != 0 {
		dst = append(dst, `,"latency_ms":`...)
		dst = strconv.AppendInt(dst, time.Duration(e.Latency).Milliseconds(), 10)
	}
	dst = appendField(dst, `,"tool":`, e.Tool)
	dst = appendField(dst, `,"call_id":`, e.CallID)
	dst = appendField(dst, `,"arguments":`, e.Arguments)
	dst = appendField(dst, `,"output":`, e.Output)
	dst = appendField(dst, `,"decision":`, e.Decision)
	return append(dst, '}'), nil
}

// appendField appends an omitempty string field: key, then s, unless s is empty.
func appendField(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendString(append(dst, key...), s)
}

const hex = "0123456789abcdef"

// appendString appends s quoted as encoding/json does with HTML escaping on.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
