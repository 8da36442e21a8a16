// Package model is the one interface Formica speaks to language models through:
// a conversation and tool schemas go in; text, tool calls and token usage come out.
//
// Providers live in subpackages (openai, anthropic, sim, scripted) and are opened
// by reference ("openai:gpt-4o", "anthropic:claude-sonnet-4-5", "sim",
// "scripted:testdata/run.yaml") through package providers.
package model
