def triplets_with_sum(number):
    pass
