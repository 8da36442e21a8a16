package webhook

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// maxURL bounds a webhook URL's length.
const maxURL = 2048

// CheckURL refuses what is not an absolute http or https URL with a host.
func CheckURL(raw string) error {
	if len(raw) > maxURL {
		return fmt.Errorf("%w: longer than %d bytes", ErrURL, maxURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %q does not parse", ErrURL, raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: %q is not http or https", ErrURL, raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%w: %q has no host", ErrURL, raw)
	}
	return nil
}

// AllowList is the URL prefixes a submitter may name webhooks under. A
// prefix is compared as written, so "https://hooks.example.com/" allows
// that host's paths while "https://hooks.example.com" would also allow
// "https://hooks.example.com.evil.net": end a prefix with a slash.
type AllowList []string

// Check says whether a submitter may name raw: a well-formed http or
// https URL under one of the prefixes.
func (a AllowList) Check(raw string) error {
	if err := CheckURL(raw); err != nil {
		return err
	}
	if len(a) == 0 {
		return fmt.Errorf("%w: %q: this coordinator allows no webhook URLs in submissions (--webhook-allow)", ErrURL, raw)
	}
	if slices.ContainsFunc(a, func(p string) bool { return strings.HasPrefix(raw, p) }) {
		return nil
	}
	return fmt.Errorf("%w: %q is under none of the prefixes allowed by --webhook-allow", ErrURL, raw)
}

// Reason is what a URL error says without the package's prefix: the
// words for a person refused at the door.
func Reason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrURL.Error()+": ")
}

// Shown is u as events show it: scheme, host and path, without the
// userinfo, query or fragment that may carry a token.
func Shown(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
