package coordinatorcmd

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/formica-run/formica/internal/coordinator"
	"github.com/formica-run/formica/internal/envflag"
	"github.com/formica-run/formica/internal/webhook"
)

// webhookFlags are the --webhook* flags (docs/webhooks.md).
type webhookFlags struct {
	urls       []string
	allow      []string
	secret     string
	secretFile string
	events     []string
}

// list is a flag that may be given again, each value one or more items
// separated by spaces (a URL holds none), so $FORMICA_<FLAG> can hold
// several.
func list(dst *[]string) func(string) error {
	return func(v string) error {
		*dst = append(*dst, strings.Fields(v)...)
		return nil
	}
}

// commaList is a flag that may be given again, each value one or more
// items separated by commas (blank ones skipped).
func commaList(dst *[]string) func(string) error {
	return func(v string) error {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*dst = append(*dst, item)
			}
		}
		return nil
	}
}

func (w *webhookFlags) register(fs *flag.FlagSet) {
	fs.Func("webhook", "`URL` to call, signed, when any run ends; may be repeated (several in one value: separated by spaces)", list(&w.urls))
	fs.Func("webhook-allow", "URL `prefix` under which a submission may name its own webhooks; may be repeated (end it with /: compared as written)", list(&w.allow))
	fs.StringVar(&w.secret, "webhook-secret", "", "Standard Webhooks `secret` (whsec_ and a base64 key of 24 to 64 bytes) that signs webhook calls; required with --webhook or --webhook-allow")
	fs.StringVar(&w.secretFile, "webhook-secret-file", "", "`file` holding the webhook secret (instead of --webhook-secret)")
	fs.Func("webhook-events", "event `types` webhooks are called for, comma-separated: "+strings.Join(webhook.EventTypes, ", ")+" (default "+webhook.RunFinished+")", commaList(&w.events))
}

// config checks the flags and makes the coordinator's WebhookConfig. Its
// errors never hold the secret.
func (w *webhookFlags) config() (coordinator.WebhookConfig, error) {
	c := coordinator.WebhookConfig{URLs: w.urls, Allow: w.allow, Events: w.events}
	for _, t := range w.events {
		if err := webhook.CheckEventType(t); err != nil {
			return c, fmt.Errorf("--webhook-events: %w", err)
		}
	}
	raw, err := envflag.Secret(w.secret, w.secretFile, "--webhook-secret", "--webhook-secret-file")
	if err != nil {
		return c, err
	}
	if raw == "" {
		if len(w.urls) > 0 || len(w.allow) > 0 {
			return c, errors.New("--webhook and --webhook-allow need a secret to sign with: give --webhook-secret or --webhook-secret-file")
		}
		return c, nil
	}
	secret, err := webhook.ParseSecret(raw)
	if err != nil {
		return c, fmt.Errorf("--webhook-secret: %w", err)
	}
	c.Secret = secret
	return c, nil
}
