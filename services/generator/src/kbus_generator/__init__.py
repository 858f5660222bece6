"""The generator: ``chunks.generate`` in, ``chunks.ready`` out, with matching texts a chat model
wrote for each chunk (questions it answers, or a short description)."""
