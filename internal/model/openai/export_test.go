package openai

import (
	"fmt"
	"os"
	"strings"
)

// FromEnv builds a Model for modelName from OPENAI_BASE_URL and
// OPENAI_API_KEY. A key is needed unless a base URL names another server.
func FromEnv(modelName string) (*Model, error) {
	base := strings.TrimSpace(os.Getenv("OPENAI_BASE_URL"))
	key := strings.TrimSpace(os.Getenv("OPENAI_API_KEY"))
	if base == "" && key == "" {
		return nil, fmt.Errorf("%w: neither OPENAI_API_KEY nor OPENAI_BASE_URL is set", ErrConfig)
	}
	return New(Config{Model: modelName, BaseURL: base, APIKey: key})
}
