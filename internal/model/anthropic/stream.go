package anthropic

import (
	"errors"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/formica-run/formica/internal/model/internal/httperr"
)

// collect reads a streamed answer into the message it amounts to, which
// response then maps as any message: the SDK's Accumulate builds the
// content blocks (thinking with its signature, tool input from its JSON
// deltas) and takes the usage from message_start and message_delta.
//
// An answer that is one JSON object instead of an event stream (gateways
// that ignore stream) is decoded as such. A stream that ends without
// message_stop was cut short and fails as a server error, never passing a
// partial answer off as complete.
func collect(stream *ssestream.Stream[anthropic.MessageStreamEventUnion], x *httperr.Exchange) (*anthropic.Message, error) {
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if plain, ok, err := httperr.DecodePlain[anthropic.Message](x); ok {
		return plain, err
	}
	var msg anthropic.Message
	n, stopped := 0, false
	for stream.Next() {
		ev := stream.Current()
		n++
		if err := msg.Accumulate(ev); err != nil {
			return nil, err
		}
		stopped = stopped || ev.Type == "message_stop"
	}
	if err := stream.Err(); err != nil {
		// An error event after the 200: the SDK decodes it as an API error
		// carrying the response's (success) status.
		if ae, ok := errors.AsType[*anthropic.Error](err); ok && ae.StatusCode < 400 {
			return nil, &httperr.EventError{Data: []byte(ae.RawJSON())}
		}
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("no event in the answer (Content-Type %q)", x.ContentType())
	}
	if !stopped {
		return nil, httperr.ErrStreamCut
	}
	return &msg, nil
}
