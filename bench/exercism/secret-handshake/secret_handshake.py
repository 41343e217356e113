def commands(binary_str):
    pass
