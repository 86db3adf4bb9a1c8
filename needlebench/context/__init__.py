"""The context a needle hides in: haystack corpora, the token budget builder and the tokenizer."""
