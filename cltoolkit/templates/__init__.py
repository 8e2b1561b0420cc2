"""Complete, valid protocol drafts per built-in suite (`clt protocol new --suite S`), taken from the shipped
protocols without their results."""
