"""SageMaker's data-parallel library for PyTorch, ztrain's stand-in:
torch_smddp."""
