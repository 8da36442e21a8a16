package wire

import (
	"encoding/binary"
	"fmt"
)

// Bounds of what a message may make a receiver allocate, checked by Check
// before anything is decoded.
const (
	// MaxDepth is the deepest nesting of maps and arrays a message may have.
	MaxDepth = 64
	// MaxMessageBytes is the largest message, offloaded payloads included.
	MaxMessageBytes = 64 << 20
	// CostPerByte and CostBase bound what a message may cost to decode,
	// estimated by Check: CostPerByte × its size + CostBase.
	CostPerByte = 16
	CostBase    = 8 << 10
)

// Estimated decoding costs, in bytes, of what Check sees: a map (a Go map,
// when it lands in an `any`), an array, any value, and the surcharge of an
// array element encoded in less than smallElement bytes (the decoder makes
// room for a whole element of the slice's type for each, however small its
// encoding; a struct can take hundreds of bytes).
const (
	costMap      = 256
	costArray    = 64
	costValue    = 16
	costSmall    = 240
	smallElement = 8
)

// Check walks a msgpack message without decoding it, in one pass and with
// no allocation, and refuses it unless it is well formed, nests maps and
// arrays at most MaxDepth deep, and declares no string, binary, map or
// array longer than the bytes that are left to hold it (every element takes
// at least one byte). The msgpack decoder trusts declared lengths: a 5-byte
// array header saying 4 billion elements makes it allocate that many, and
// deep nesting costs a stack frame and a map per level, hundreds of bytes
// for each byte of input. Check also estimates what decoding will allocate
// (maps, arrays, values, tiny array elements) and refuses a message whose
// estimate is over CostPerByte × its size + CostBase, so what the decoder
// allocates stays within a small multiple of the message's size (see
// TestLargeMessagesCostAMultipleOfTheirSize).
func Check(data []byte) error {
	if len(data) > MaxMessageBytes {
		return &Error{Code: CodeBadMessage, Message: fmt.Sprintf("message of %d bytes is over the %d-byte limit", len(data), MaxMessageBytes)}
	}
	var stack [MaxDepth + 1]int32 // items still to read in each open container (fewer than MaxMessageBytes)
	var array [MaxDepth + 1]bool
	budget := CostPerByte*len(data) + CostBase
	cost := 0
	depth := 0
	stack[0] = 1 // the top value
	p := 0
	for {
		for depth > 0 && stack[depth] == 0 {
			depth--
		}
		if stack[depth] == 0 {
			break
		}
		stack[depth]--
		if p >= len(data) {
			return malformed(p, "truncated")
		}
		start := p
		inArray := array[depth]
		c := data[p]
		p++
		size, items := 0, 0 // bytes of payload to skip; child items to read
		switch {
		case c <= 0x7f || c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		case c <= 0x8f:
			items = 2 * int(c&0x0f)
		case c <= 0x9f:
			items = int(c & 0x0f)
		case c <= 0xbf:
			size = int(c & 0x1f)
		default:
			var n uint64
			var w int
			switch c {
			case 0xcc, 0xd0:
				size = 1
			case 0xcd, 0xd1:
				size = 2
			case 0xca, 0xce, 0xd2:
				size = 4
			case 0xcb, 0xcf, 0xd3:
				size = 8
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
				size = 1 + 1<<(c-0xd4) // type byte and 1, 2, 4, 8 or 16 bytes
			case 0xc4, 0xd9:
				w = 1
			case 0xc5, 0xda, 0xdc, 0xde:
				w = 2
			case 0xc6, 0xdb, 0xdd, 0xdf:
				w = 4
			case 0xc7:
				w, size = 1, 1
			case 0xc8:
				w, size = 2, 1
			case 0xc9:
				w, size = 4, 1
			default:
				return malformed(p, "unknown code 0x%02x", int(c))
			}
			if w > 0 {
				if len(data)-p < w {
					return malformed(p, "truncated length")
				}
				switch w {
				case 1:
					n = uint64(data[p])
				case 2:
					n = uint64(binary.BigEndian.Uint16(data[p:]))
				case 4:
					n = uint64(binary.BigEndian.Uint32(data[p:]))
				}
				p += w
				if n > uint64(len(data)) {
					return malformed(p, "length %d is longer than the message", int(n))
				}
				switch c {
				case 0xdc, 0xdd:
					items = int(n)
				case 0xde, 0xdf:
					items = 2 * int(n)
				default:
					size += int(n)
				}
			}
		}
		if size > len(data)-p {
			return malformed(p, "%d bytes declared, %d left", size, len(data)-p)
		}
		p += size
		cost += costValue
		isMap := c >= 0x80 && c <= 0x8f || c == 0xde || c == 0xdf
		isArray := c >= 0x90 && c <= 0x9f || c == 0xdc || c == 0xdd
		switch {
		case isMap:
			cost += costMap
		case isArray:
			cost += costArray
		}
		if inArray && p-start < smallElement && (items == 0 || !isMap && !isArray) {
			cost += costSmall
		}
		if cost > budget {
			return malformed(p, "decoding would cost more than %d bytes (%d per byte of message)", budget, CostPerByte)
		}
		if items > 0 {
			if items > len(data)-p {
				return malformed(p, "%d elements declared, %d bytes left", items, len(data)-p)
			}
			if depth == MaxDepth {
				return malformed(p, "nested deeper than %d", MaxDepth)
			}
			depth++
			stack[depth] = int32(items)
			array[depth] = isArray
		}
	}
	if p != len(data) {
		return malformed(p, "%d bytes after the message", len(data)-p)
	}
	return nil
}

// malformed is Check's error for the message byte at p, its text made of
// format and args.
func malformed(p int, format string, args ...int) error {
	a := make([]any, 0, 1+len(args))
	a = append(a, p)
	for _, v := range args {
		a = append(a, v)
	}
	return &Error{Code: CodeBadMessage, Message: fmt.Sprintf("malformed message at byte %d: "+format, a...)}
}
