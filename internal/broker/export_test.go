package broker

// MonitorURL is the HTTP monitoring endpoint's base URL
// (http://host:port), "" when ServerConfig.Monitor is off.
func (s *Server) MonitorURL() string {
	a := s.ns.MonitorAddr()
	if a == nil {
		return ""
	}
	return "http://" + a.String()
}

// Validate reports, wrapped in ErrInvalidConfig, why c cannot work.
func (c *ServerConfig) Validate() error {
	_, err := c.options()
	return err
}
