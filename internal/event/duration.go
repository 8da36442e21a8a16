package event

import (
	"encoding/json"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Duration is a time.Duration that travels as whole milliseconds, an
// integer, in every encoding (JSON over SSE and in records, msgpack on
// NATS), so a field named `*_ms` means the same number everywhere.
type Duration time.Duration

// MarshalJSON writes milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Milliseconds())
}

// UnmarshalJSON reads milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}

var (
	_ msgpack.CustomEncoder = Duration(0)
	_ msgpack.CustomDecoder = (*Duration)(nil)
)

// EncodeMsgpack writes milliseconds.
func (d Duration) EncodeMsgpack(enc *msgpack.Encoder) error {
	return enc.EncodeInt(time.Duration(d).Milliseconds())
}

// DecodeMsgpack reads milliseconds.
func (d *Duration) DecodeMsgpack(dec *msgpack.Decoder) error {
	ms, err := dec.DecodeInt64()
	if err != nil {
		return err
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}
