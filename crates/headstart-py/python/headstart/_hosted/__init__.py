"""A framework's own loop, hosting headstart: what LangChain's and the Agents SDK's faces share.

Each face wraps the framework's model and tools, never its loop. The model's stream passes through a ``DeltaFeed``
into one engine response (``Response``) of the chat's session (``Chat``); the engine admits each call and asks for
it; an early call runs at once, the others when the framework runs them (the wrapped tool claims the ``Call``)."""
