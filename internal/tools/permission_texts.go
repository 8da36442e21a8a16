package tools

// DeniedText is the tool result of a call the policy denies.
func DeniedText(tool string) string {
	return "Tool call denied by permission policy: " + tool
}

// NotApprovedText is the tool result of an asked call the approver turned down.
func NotApprovedText(tool, reason string) string {
	if reason == "" {
		return "Tool call not approved: " + tool
	}
	return "Tool call not approved: " + tool + " (" + reason + ")"
}
