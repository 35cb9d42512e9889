"""Pinned trial images: stacks, locked requirements, build context, build and push, the image lock."""
