package anthropic

import (
	"fmt"
	"os"
	"strings"
)

// FromEnv builds a Model for modelName from ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL. A key is needed unless a base URL names another server.
func FromEnv(modelName string) (*Model, error) {
	base := strings.TrimSpace(os.Getenv("ANTHROPIC_BASE_URL"))
	key := strings.TrimSpace(os.Getenv("ANTHROPIC_API_KEY"))
	if base == "" && key == "" {
		return nil, fmt.Errorf("%w: ANTHROPIC_API_KEY is not set", ErrConfig)
	}
	return New(Config{Model: modelName, BaseURL: base, APIKey: key})
}
