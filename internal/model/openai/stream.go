package openai

import (
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/formica-run/formica/internal/model/internal/httperr"
)

// collect reads a streamed answer into the completion it amounts to, which
// response then maps as any completion. The usage is the last one a chunk
// carried: with include_usage OpenAI sends it once, in the final chunk,
// and servers that send running totals in every chunk end on the whole.
//
// An answer that is one JSON object instead of an event stream (local
// servers that ignore stream) is decoded as such. A stream that ends before
// its choice has a finish_reason was cut short and fails as a server error,
// never passing a partial answer off as complete.
func collect(stream *ssestream.Stream[openai.ChatCompletionChunk], x *httperr.Exchange) (*openai.ChatCompletion, error) {
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if plain, ok, err := httperr.DecodePlain[openai.ChatCompletion](x); ok {
		return plain, err
	}
	var acc openai.ChatCompletionAccumulator
	var u openai.CompletionUsage
	n := 0
	for stream.Next() {
		chunk := stream.Current()
		n++
		if !acc.AddChunk(chunk) {
			return nil, fmt.Errorf("chunk %d does not continue the stream (id %q, choice indices out of range or too large)", n, chunk.ID)
		}
		if chunk.JSON.Usage.Valid() {
			u = chunk.Usage
		}
	}
	if err := stream.Err(); err != nil {
		if se, ok := errors.AsType[*ssestream.StreamError](err); ok {
			return nil, &httperr.EventError{Data: se.Event.Data}
		}
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("no chunk in the answer (Content-Type %q)", x.ContentType())
	}
	c := acc.ChatCompletion
	if len(c.Choices) > 0 && c.Choices[0].FinishReason == "" {
		return nil, httperr.ErrStreamCut
	}
	c.Usage = u
	return &c, nil
}
